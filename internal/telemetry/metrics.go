package telemetry

import (
	"context"
	"io/fs"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rath-run/rath/pkg/sandbox"
)

// Metrics holds the Prometheus series Rath's processes export. Create it
// with [NewMetrics] on the process's registry; a nil *Metrics records
// nothing. docs/observability.md lists the series. Model labels carry only
// the models named by [Metrics.KnownModels], others are "other".
type Metrics struct {
	StepsStarted     *prometheus.CounterVec
	StepsCommitted   *prometheus.CounterVec
	StepsFailed      *prometheus.CounterVec
	StepsRedelivered *prometheus.CounterVec
	StepDuration     *prometheus.HistogramVec
	ModelCalls       *prometheus.CounterVec
	ModelTokens      *prometheus.CounterVec
	ModelCost        *prometheus.CounterVec
	ModelDuration    *prometheus.HistogramVec
	ToolCalls        *prometheus.CounterVec
	ToolDuration     *prometheus.HistogramVec
	SandboxCalls     *prometheus.CounterVec
	SandboxDuration  *prometheus.HistogramVec
	RunsSubmitted    prometheus.Counter
	HTTPRequests     *prometheus.CounterVec
	// TokenLookups counts the stored API tokens the coordinator
	// authenticated, by what answered: its token cache or the store.
	TokenLookups *prometheus.CounterVec
	// TokenCacheSuspended is 1 while the coordinator's token cache is
	// suspended (it cannot hear other replicas' revocations).
	TokenCacheSuspended prometheus.Gauge

	models knownModels // labeled models; see KnownModels
	// tokenFromCache and tokenFromStore are TokenLookups' two series,
	// resolved once: TokenLookup runs on every authenticated request.
	tokenFromCache, tokenFromStore prometheus.Counter
}

// NewRegistry returns a registry with the Go runtime and process
// collectors: one per process, never the global default.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// NewMetrics creates Rath's series and registers them on reg. It panics
// only if reg already holds them (a wiring bug).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	durations := []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
	m := &Metrics{
		StepsStarted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rath_steps_started_total",
			Help: "Steps a worker started (each delivery that ran the agent)."}, []string{"queue"}),
		StepsCommitted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rath_steps_committed_total",
			Help: "Steps committed as a new session version."}, []string{"queue"}),
		StepsFailed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rath_steps_failed_total",
			Help: "Step attempts that failed; kind is retry (NAKed for another delivery) or terminal (recorded as failed)."}, []string{"queue", "kind"}),
		StepsRedelivered: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rath_steps_redelivered_total",
			Help: "Job deliveries after the first (NumDelivered > 1)."}, []string{"queue"}),
		StepDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "rath_step_duration_seconds",
			Help: "Time from a job's delivery to its settlement, by outcome (committed, retry, failed).", Buckets: durations}, []string{"queue", "outcome"}),
		ModelCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rath_model_calls_total",
			Help: "Model (chat) calls, by requested model and outcome (ok, error)."}, []string{"model", "outcome"}),
		ModelTokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rath_model_tokens_total",
			Help: "Tokens used by model calls, by model and type (input, output)."}, []string{"model", "type"}),
		ModelCost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rath_model_cost_usd_total",
			Help: "Cost in USD of committed steps under their spec's pricing, by model."}, []string{"model"}),
		ModelDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "rath_model_call_duration_seconds",
			Help: "Model call latency.", Buckets: durations}, []string{"model"}),
		ToolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rath_tool_calls_total",
			Help: "Tool calls, by tool and outcome (ok, error)."}, []string{"tool", "outcome"}),
		ToolDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "rath_tool_call_duration_seconds",
			Help: "Tool call latency.", Buckets: durations}, []string{"tool"}),
		SandboxCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rath_sandbox_calls_total",
			Help: "Sandbox operations (exec, read_file, write_file, list, stat), by outcome (ok, error)."}, []string{"op", "outcome"}),
		SandboxDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "rath_sandbox_call_duration_seconds",
			Help: "Sandbox operation latency.", Buckets: durations}, []string{"op"}),
		RunsSubmitted: prometheus.NewCounter(prometheus.CounterOpts{Name: "rath_runs_submitted_total",
			Help: "Runs submitted to the coordinator."}),
		HTTPRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rath_http_requests_total",
			Help: "Coordinator API requests, by method and status code."}, []string{"method", "code"}),
		TokenLookups: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rath_token_lookups_total",
			Help: "Stored API tokens presented to the coordinator, by what answered: cache (its token cache) or store (a query; refusals included)."}, []string{"answered_by"}),
		TokenCacheSuspended: prometheus.NewGauge(prometheus.GaugeOpts{Name: "rath_token_cache_suspended",
			Help: "1 while the coordinator's token cache is suspended: its NATS connection is down or it is not yet listening for other replicas' revocations, and every request asks the store."}),
	}
	reg.MustRegister(m.StepsStarted, m.StepsCommitted, m.StepsFailed, m.StepsRedelivered, m.StepDuration,
		m.ModelCalls, m.ModelTokens, m.ModelCost, m.ModelDuration, m.ToolCalls, m.ToolDuration,
		m.SandboxCalls, m.SandboxDuration, m.RunsSubmitted, m.HTTPRequests, m.TokenLookups, m.TokenCacheSuspended)
	m.tokenFromCache = m.TokenLookups.WithLabelValues("cache")
	m.tokenFromStore = m.TokenLookups.WithLabelValues("store")
	return m
}

// TokenLookup counts a stored token the coordinator authenticated,
// answered by its cache or by the store.
func (m *Metrics) TokenLookup(fromCache bool) {
	if m == nil {
		return
	}
	if fromCache {
		m.tokenFromCache.Inc()
		return
	}
	m.tokenFromStore.Inc()
}

// TokenCacheSuspend records whether the coordinator's token cache is
// suspended.
func (m *Metrics) TokenCacheSuspend(suspended bool) {
	if m == nil {
		return
	}
	if suspended {
		m.TokenCacheSuspended.Set(1)
		return
	}
	m.TokenCacheSuspended.Set(0)
}

// Handler serves g in the Prometheus text format (/metrics).
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}

func outcome(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

func (m *Metrics) modelCall(model string, in, out int64, d time.Duration, err error) {
	if m == nil {
		return
	}
	model = m.ModelLabel(model)
	m.ModelCalls.WithLabelValues(model, outcome(err)).Inc()
	m.ModelDuration.WithLabelValues(model).Observe(d.Seconds())
	m.ModelTokens.WithLabelValues(model, "input").Add(float64(in))
	m.ModelTokens.WithLabelValues(model, "output").Add(float64(out))
}

func (m *Metrics) toolCall(name string, d time.Duration, err error) {
	if m == nil {
		return
	}
	name = ToolLabel(name)
	m.ToolCalls.WithLabelValues(name, outcome(err)).Inc()
	m.ToolDuration.WithLabelValues(name).Observe(d.Seconds())
}

// StepStarted counts a started step (and a redelivery when delivery > 1).
func (m *Metrics) StepStarted(queue string, delivery uint64) {
	if m == nil {
		return
	}
	m.StepsStarted.WithLabelValues(queue).Inc()
	if delivery > 1 {
		m.StepsRedelivered.WithLabelValues(queue).Inc()
	}
}

// StepEnded records a settled step: outcome is committed, retry or
// failed; d is the time since delivery.
func (m *Metrics) StepEnded(queue, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	// The duration first: a scrape that starts after one has seen the
	// step counted sees its duration too (within one scrape the registry
	// gathers the two concurrently, in no set order).
	m.StepDuration.WithLabelValues(queue, outcome).Observe(d.Seconds())
	switch outcome {
	case "committed":
		m.StepsCommitted.WithLabelValues(queue).Inc()
	case "retry":
		m.StepsFailed.WithLabelValues(queue, "retry").Inc()
	case "failed":
		m.StepsFailed.WithLabelValues(queue, "terminal").Inc()
	}
}

// StepCost adds a committed step's cost under model.
func (m *Metrics) StepCost(model string, usd float64) {
	if m == nil || usd <= 0 {
		return
	}
	m.ModelCost.WithLabelValues(m.ModelLabel(model)).Add(usd)
}

// RunSubmitted counts a submitted run.
func (m *Metrics) RunSubmitted() {
	if m != nil {
		m.RunsSubmitted.Inc()
	}
}

// InstrumentHTTP counts the requests next serves by method and status.
func (m *Metrics) InstrumentHTTP(next http.Handler) http.Handler {
	if m == nil {
		return next
	}
	return promhttp.InstrumentHandlerCounter(m.HTTPRequests, next)
}

// PendingFunc reports a queue consumer's backlog: jobs waiting for a
// worker and jobs delivered but not yet acked.
type PendingFunc func(ctx context.Context) (waiting, unacked uint64, err error)

// RegisterQueueLag registers rath_queue_pending_jobs and
// rath_queue_unacked_jobs for queue, sampled from pending at each scrape
// (bounded by 2s; a failed sample is left out of the scrape).
func RegisterQueueLag(reg prometheus.Registerer, queue string, pending PendingFunc) error {
	return reg.Register(&queueLag{queue: queue, pending: pending, //nolint:wrapcheck // prometheus names the series
		waiting: prometheus.NewDesc("rath_queue_pending_jobs", "Jobs in the queue waiting for a worker (JetStream consumer NumPending).", nil, prometheus.Labels{"queue": queue}),
		unacked: prometheus.NewDesc("rath_queue_unacked_jobs", "Jobs delivered to workers and not yet acked (JetStream NumAckPending).", nil, prometheus.Labels{"queue": queue}),
	})
}

type queueLag struct {
	queue            string
	pending          PendingFunc
	waiting, unacked *prometheus.Desc
}

func (q *queueLag) Describe(ch chan<- *prometheus.Desc) { ch <- q.waiting; ch <- q.unacked }

func (q *queueLag) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	w, u, err := q.pending(ctx)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(q.waiting, prometheus.GaugeValue, float64(w))
	ch <- prometheus.MustNewConstMetric(q.unacked, prometheus.GaugeValue, float64(u))
}

// CountFunc counts something at scrape time.
type CountFunc func(ctx context.Context) (int, error)

// RegisterActiveRuns registers rath_active_runs, sampled from count at
// each scrape (bounded by 2s).
func RegisterActiveRuns(reg prometheus.Registerer, count CountFunc) error {
	return reg.Register(&activeRuns{count: count, //nolint:wrapcheck // prometheus names the series
		desc: prometheus.NewDesc("rath_active_runs", "Runs not yet ended (pending, running or waiting).", nil, nil)})
}

type activeRuns struct {
	count CountFunc
	desc  *prometheus.Desc
}

func (a *activeRuns) Describe(ch chan<- *prometheus.Desc) { ch <- a.desc }

func (a *activeRuns) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, err := a.count(ctx)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(a.desc, prometheus.GaugeValue, float64(n))
}

// InstrumentSandbox returns sb with every operation counted and timed in
// m; a nil m returns sb.
func InstrumentSandbox(sb sandbox.Sandbox, m *Metrics) sandbox.Sandbox {
	if m == nil || sb == nil {
		return sb
	}
	return &meteredSandbox{sb: sb, m: m}
}

type meteredSandbox struct {
	sb sandbox.Sandbox
	m  *Metrics
}

func (s *meteredSandbox) observe(op string, start time.Time, err error) {
	s.m.SandboxCalls.WithLabelValues(op, outcome(err)).Inc()
	s.m.SandboxDuration.WithLabelValues(op).Observe(time.Since(start).Seconds())
}

//nolint:wrapcheck // a transparent wrapper: the sandbox's errors pass through unchanged
func (s *meteredSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	start := time.Now()
	r, err := s.sb.Exec(ctx, req)
	s.observe("exec", start, err)
	return r, err
}

//nolint:wrapcheck // see Exec
func (s *meteredSandbox) ReadFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	start := time.Now()
	b, err := s.sb.ReadFile(ctx, path, limit)
	s.observe("read_file", start, err)
	return b, err
}

//nolint:wrapcheck // see Exec
func (s *meteredSandbox) WriteFile(ctx context.Context, path string, data []byte, perm fs.FileMode) error {
	start := time.Now()
	err := s.sb.WriteFile(ctx, path, data, perm)
	s.observe("write_file", start, err)
	return err
}

//nolint:wrapcheck // see Exec
func (s *meteredSandbox) List(ctx context.Context, path string) ([]sandbox.FileInfo, error) {
	start := time.Now()
	fi, err := s.sb.List(ctx, path)
	s.observe("list", start, err)
	return fi, err
}

//nolint:wrapcheck // see Exec
func (s *meteredSandbox) Stat(ctx context.Context, path string) (sandbox.FileInfo, error) {
	start := time.Now()
	fi, err := s.sb.Stat(ctx, path)
	s.observe("stat", start, err)
	return fi, err
}

//nolint:wrapcheck // see Exec
func (s *meteredSandbox) Close(ctx context.Context) error { return s.sb.Close(ctx) }
