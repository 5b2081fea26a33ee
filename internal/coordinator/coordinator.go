// Package coordinator is Rath's control plane: an HTTP JSON API over the
// Session Graph and runs, the publisher of step jobs, and the reconciler
// that republishes steps whose jobs were lost.
//
// A Coordinator is four parts:
//
//   - the HTTP handlers (Handler): the auth middleware resolves each
//     request's tenant Scope once, and the handlers decode, call and
//     encode;
//   - the run service (Runs, runservice.go): submit, cancel, decide and a
//     workflow run's steps, each taking the caller's Scope;
//   - the workflow driver and the reconciler, with the event feed that
//     wakes step waits: services (Services) that the program starts
//     beside the handler and stops, waiting for them, on shutdown. New
//     starts no goroutine.
//
// The coordinator is stateless apart from Postgres (or the embedded store)
// and JetStream, so several replicas may run; only the holder of the
// "reconciler" lease reconciles, and only the holder of the "workflows"
// lease drives workflow runs. docs/api.md documents the API.
package coordinator

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/rath-run/rath/internal/auth"
	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/service"
	"github.com/rath-run/rath/internal/telemetry"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/memory"
	"github.com/rath-run/rath/pkg/sandbox/policy"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/tool"
)

// Config configures a Coordinator. Zero values take the defaults.
type Config struct {
	// Name identifies this replica for the reconciler lease; default host-pid.
	Name string
	// Queue is the default job queue; default "default".
	Queue string
	// Token, when set, is the bootstrap bearer token: it authenticates as an
	// admin of the default tenant, and setting it turns authentication on.
	Token string
	// RequireAuth turns authentication on without a bootstrap token: every
	// /v1 request must carry a token Tokens knows (docs/security.md).
	RequireAuth bool
	// Tokens checks stored API tokens and serves the /v1/tokens endpoints;
	// nil: only Token authenticates.
	Tokens *auth.Store
	// TokenCacheTTL, when positive, is how long a token Tokens verified is
	// trusted without asking it again (auth.Cache): a revocation through
	// this coordinator takes effect on the next request; one through
	// another coordinator as soon as its announcement on the bus arrives
	// (revocations.go), else within the TTL, as does one made in the store
	// directly; an expiry is exact. On a bus that carries announcements the
	// cache holds tokens only while this coordinator hears them: from when
	// Services have subscribed, and never while its NATS connection is
	// down, when every request asks the store. Zero: every request asks
	// the store. The coordinator program's default is 1s (--token-cache).
	TokenCacheTTL time.Duration
	// Tenants confines each authenticated request to its tenant's rows
	// (Postgres row-level security through *auth.TenantPools). Nil: the
	// coordinator serves only the default tenant (the embedded store).
	Tenants TenantStores
	// Memory serves /v1/memory to requests bound to no tenant (system work,
	// authentication off, the embedded store's default tenant). Tenants'
	// requests use Tenants' confined memory stores (TenantMemory). Nil: no
	// memory over the API for such requests (404).
	Memory memory.Store
	// Retention serves gc, pins, redaction and check (/v1/admin, admin.go)
	// to requests bound to no tenant (authentication off, the embedded
	// store's default tenant). Tenants' requests use Tenants' confined
	// retention (TenantRetention). Nil: those endpoints answer 501.
	Retention *lineage.Retention
	// MaxBodyBytes bounds a request body; default 1 MiB.
	MaxBodyBytes int64
	// MaxImportBytes bounds a session JSONL import body; default 64 MiB.
	// The coordinator reads a body whole into a temporary file before
	// importing it in one transaction.
	MaxImportBytes int64
	// EventStreamsPerToken caps the live GET /v1/runs/{id}/events streams
	// one token holds at once on this replica (each holds a JetStream
	// consumer; an ended run's stream holds none); past it, 429 with
	// Retry-After. Not applied when authentication is off (no token).
	// Default DefaultEventStreamsPerToken (8).
	EventStreamsPerToken int
	// EventStreamsPerTenant caps a tenant's live event streams on this
	// replica, all its tokens together. Keep it, times the replicas and
	// the tenants you expect to stream at once, under the events stream's
	// consumer limit (NATS: 1,000 by default). Default
	// DefaultEventStreamsPerTenant (100).
	EventStreamsPerTenant int
	// MaxConcurrentImports bounds the session imports read and run at once
	// (each may spool up to MaxImportBytes to disk); more wait. Default 4.
	MaxConcurrentImports int
	// ReconcileInterval is how often the leader scans for lost steps;
	// default 10s.
	ReconcileInterval time.Duration
	// StaleAfter is how long an unfinished step may go without an update
	// (workers touch running steps every heartbeat) before the reconciler
	// republishes its job; default 2m.
	StaleAfter time.Duration
	// LeaseTTL is the reconciler lease's lifetime; default 3 ×
	// ReconcileInterval.
	LeaseTTL time.Duration
	// MaxDeliver must equal the bus's MaxDeliver: a stale step whose job is
	// still queued is left to JetStream unless it has started this many
	// times (its job is then a dead letter). Default bus.DefaultMaxDeliver.
	MaxDeliver int
	// QueueScanLimit bounds how many queued jobs one reconcile pass reads
	// per queue to tell a lost job from one waiting behind a backlog;
	// default 10,000.
	QueueScanLimit int
	// SameDatabase says the run store lives in the graph store's database
	// (both opened from one URL, as internal/app does). Submit then records
	// a new session and its run in one transaction, one commit instead of
	// two. Never set it when they are different databases: the run would be
	// written to the graph store's.
	SameDatabase bool
	// RunReads, when set, serves the workflow endpoints' reads of the run
	// store (a step's status for PUT and the waits of GET …/steps/{key})
	// from other connections than its writes: the embedded store's
	// read-only connections, so that 1,000 waiting drivers do not queue
	// behind its single writer. It must read the same database as the run
	// store. Tenant-bound requests read their own store.
	RunReads *runs.Store
	// Workspaces reads workspace snapshot manifests for the files and diff
	// endpoints; default: the bus's object store, when the bus has one.
	Workspaces Manifests
	// SandboxPolicy is the operator's sandbox policy (the workers' too):
	// a placement entering through the API (POST /v1/versions, a session
	// import, the session a run forwards) that it refuses is a 400 naming
	// the field ([Coordinator.validatePlacement]). nil checks nothing: the
	// program is its own operator (tests); internal/app always sets one.
	SandboxPolicy *policy.Policy
	// Tools, when set, are the tools every worker of the deployment
	// offers by name (the workers' worker.Config.Tools): an agent run, a
	// workflow file's agent or a client-driven step whose spec names
	// another is refused at submit, a 400 naming agent.tools[i] and the
	// tools there are, instead of failing on the worker after the run
	// started. Only the names matter: the coordinator never calls them.
	// nil checks nothing. internal/app.ToolOffer builds it from the
	// built-ins and the operator's RATH_TOOLS; the dev stack sets it to
	// its workers' registry.
	Tools *tool.Registry
	// MCP, when set, is the operator's MCP policy (the workers'
	// RATH_MCP_ALLOW): a spec with an MCP server whose command it does not
	// allow is refused at submit, a 400 naming agent.mcp[i].command. nil
	// checks nothing.
	MCP *MCPPolicy
	// Logger defaults to discarding.
	Logger *slog.Logger
	// TracerProvider traces API requests and the publishing of step jobs,
	// whose trace context travels in the job's NATS headers; nil means no
	// tracing.
	TracerProvider trace.TracerProvider
	// Metrics counts submitted runs and API requests; nil records nothing.
	Metrics *telemetry.Metrics
	// Gatherer, when set, is served at GET /metrics (outside /v1 auth).
	Gatherer prometheus.Gatherer
	// JaegerURL is the base of the web UI's trace links
	// (JAEGER/trace/<trace id>); empty hides them.
	JaegerURL string
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Name == "" {
		host, _ := os.Hostname()
		c.Name = fmt.Sprintf("%s-%d", cmp.Or(host, "coordinator"), os.Getpid())
	}
	c.Queue = cmp.Or(c.Queue, "default")
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, 1<<20)
	c.MaxImportBytes = cmp.Or(c.MaxImportBytes, 64<<20)
	c.EventStreamsPerToken = cmp.Or(c.EventStreamsPerToken, DefaultEventStreamsPerToken)
	c.EventStreamsPerTenant = cmp.Or(c.EventStreamsPerTenant, DefaultEventStreamsPerTenant)
	c.MaxConcurrentImports = cmp.Or(c.MaxConcurrentImports, 4)
	c.ReconcileInterval = cmp.Or(c.ReconcileInterval, 10*time.Second)
	c.StaleAfter = cmp.Or(c.StaleAfter, 2*time.Minute)
	c.LeaseTTL = cmp.Or(c.LeaseTTL, 3*c.ReconcileInterval)
	c.MaxDeliver = cmp.Or(c.MaxDeliver, bus.DefaultMaxDeliver)
	c.QueueScanLimit = cmp.Or(c.QueueScanLimit, 10_000)
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

// Bus is the part of the message bus the coordinator uses.
type Bus interface {
	Publish(ctx context.Context, job bus.Job, hdr nats.Header) (bool, error)
	PublishEvent(ctx context.Context, e bus.Event) error
	PublishProgress(ctx context.Context, e bus.Event) error
	WatchRunAfter(ctx context.Context, runID string, after uint64) (<-chan bus.StoredEvent, func() error, error)
	ReplayRun(ctx context.Context, runID string, after uint64, fn func(bus.StoredEvent) error) (uint64, error)
	QueuedSteps(ctx context.Context, queue string, limit int) (map[string]bool, bool, error)
}

// Coordinator serves the API and drives runs.
type Coordinator struct {
	cfg   Config
	graph store.Store // tenantGraph: the request's tenant's store, else sysGraph
	// sysGraph is the store New was given: system work and unauthenticated
	// (authentication off) requests use it.
	sysGraph store.Store
	runs     *runs.Store
	bus      Bus
	log      *slog.Logger

	manifests Manifests
	// waiters wakes the step waits (workflows.go) on events about their
	// step, fed by feed.
	waiters *stepWaiters
	// The coordinator's services, which its program starts and stops
	// (Services): the event feed, the workflow driver and the reconciler.
	feed       *EventFeed
	driver     *WorkflowDriver
	reconciler *Reconciler
	// runSvc submits, cancels and decides runs and keeps workflow steps
	// (runservice.go); the handlers call it.
	runSvc *RunService
	// routes is the /v1 mux Handler built last (auth.go), for route checks.
	routes atomic.Pointer[apiMux]
	// specs caches parsed agent specs of submits (specs.go).
	specs *specCache
	// streams caps live event streams per token and tenant (limits.go).
	streams *streamLimiter
	// imports holds a slot per session import in progress (importbody.go).
	imports chan struct{}
	// tokens verifies stored tokens: cfg.Tokens, behind a cache when
	// cfg.TokenCacheTTL is set (auth.go); nil without cfg.Tokens.
	tokens auth.Verifier
	// tokenCache is tokens when it is a cache: revocations tell it.
	tokenCache *auth.Cache
	// revocations keeps tokenCache in step with the other replicas'
	// revocations (revocations.go), one of Services.
	revocations *tokenRevocations
}

// New returns a coordinator over a migrated store, its run store and a bus.
func New(graph store.Store, rs *runs.Store, b Bus, cfg Config) (*Coordinator, error) {
	if graph == nil || rs == nil || b == nil {
		return nil, errors.New("coordinator: store, run store and bus are required")
	}
	if cfg.EventStreamsPerToken < 0 || cfg.EventStreamsPerTenant < 0 {
		return nil, fmt.Errorf("coordinator: EventStreamsPerToken %d, EventStreamsPerTenant %d: want >= 0 (0: the default)", cfg.EventStreamsPerToken, cfg.EventStreamsPerTenant)
	}
	cfg = cfg.WithDefaults()
	manifests := cfg.Workspaces
	if manifests == nil {
		var err error
		if manifests, err = defaultManifests(b); err != nil {
			return nil, err
		}
	}
	c := &Coordinator{cfg: cfg, sysGraph: graph, runs: rs, bus: b, log: cfg.Logger, manifests: manifests, specs: newSpecCache(),
		streams: newStreamLimiter(cfg.EventStreamsPerToken, cfg.EventStreamsPerTenant),
		imports: make(chan struct{}, cfg.MaxConcurrentImports)}
	c.graph = tenantGraph{c}
	if cfg.Tokens != nil {
		c.tokens = storeTokens{cfg.Tokens, cfg.Metrics}
		if cfg.TokenCacheTTL > 0 {
			c.tokenCache = auth.NewCache(cfg.Tokens, cfg.TokenCacheTTL, cfg.Metrics.TokenLookup)
			c.tokens = c.tokenCache
			if _, ok := b.(revocationBus); ok {
				// Until the revocation listener hears the other replicas.
				c.tokenCacheHears(false)
			}
		}
	}
	c.waiters = &stepWaiters{}
	c.feed = &EventFeed{bus: b, waiters: c.waiters, log: cfg.Logger}
	c.driver = newWorkflowDriver(c)
	c.reconciler = &Reconciler{c: c}
	c.revocations = &tokenRevocations{c: c}
	c.runSvc = &RunService{c: c}
	return c, nil
}

// Services returns the coordinator's background services in the order to
// start them: the event feed (step waits listen to it), the workflow
// driver, the reconciler, and the listener for other replicas' token
// revocations (revocations.go). Its program starts them (Group.Start)
// beside the HTTP handler and stops them (Group.Stop) after the handler
// has drained;
// the coordinator starts no goroutine of its own. Without them the API
// still serves, but no declarative workflow runs, no run times out and no
// lost step is republished, and step waits poll.
func (c *Coordinator) Services() service.Group {
	return service.Group{c.feed, c.driver, c.reconciler, c.revocations}
}

// Reconciler returns the coordinator's reconciler (one of Services).
func (c *Coordinator) Reconciler() *Reconciler { return c.reconciler }

// SubmitRequest is the body of POST /v1/runs (package api).
type SubmitRequest = api.SubmitRequest

// ErrBadRequest marks errors in what a client sent.
var ErrBadRequest = errors.New("bad request")

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadRequest, fmt.Sprintf(format, args...))
}

// afterCommit bounds the work that follows a commit on a caller's behalf
// (a step's job), which no longer ends with the caller: see detached.
const afterCommit = 10 * time.Second

// detached is ctx for work that must follow a commit whether or not its
// caller is still there (a client that hung up after its submit reached
// the store): ctx's values, not its cancellation, for at most afterCommit.
// A committed step whose job was not published would wait for the
// reconciler, StaleAfter later.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), afterCommit)
}

// publishCommitted is publishStep for a step a caller's request has just
// committed: it publishes even when the caller has gone (detached).
func (c *Coordinator) publishCommitted(ctx context.Context, g store.Store, r runs.Run, st runs.Step, msgID string) error {
	ctx, cancel := detached(ctx)
	defer cancel()
	return c.publishStep(ctx, g, r, st, msgID)
}

// publishStep publishes st's job, with what the run's other steps spent
// read from g (the scope's graph).
func (c *Coordinator) publishStep(ctx context.Context, g store.Store, r runs.Run, st runs.Step, msgID string) error {
	job := bus.Job{
		V: bus.JobVersion, StepID: st.ID, RunID: r.ID, Queue: r.Queue,
		Input: st.Input.String(), Target: r.Target, CreatedAt: time.Now().UTC(), Conversation: r.Conversation,
	}
	if len(st.Target) > 0 {
		job.Target = st.Target // a workflow step's own call
	}
	if !r.Budget.IsZero() {
		b, err := spentWith(ctx, g, r, st)
		if err != nil {
			return err
		}
		job.Budget = &b
	}
	hdr := nats.Header{}
	if msgID != st.ID {
		// Publish keeps a message id the caller set (republish).
		hdr.Set(bus.HeaderMsgID, msgID)
	}
	// The step's span is a child of the run's, whoever publishes it.
	rctx := telemetry.RunContext(ctx, r.TraceContext)
	pctx, span := c.publishSpan(rctx, job, hdr, telemetry.CallerLink(ctx, rctx))
	_, err := c.bus.Publish(pctx, job, hdr)
	endSpan(span, err)
	return err
}

func runEndEvent(r runs.Run) bus.Event {
	typ := "run." + string(r.Status)
	if r.Status == runs.RunSucceeded {
		typ = "run.completed"
	}
	return bus.Event{RunID: r.ID, Type: typ, Data: mustJSON(map[string]any{"output": r.Output, "error": r.Error})}
}

// event publishes e (events are best effort: a failure is a debug line).
func (c *Coordinator) event(ctx context.Context, e bus.Event) { c.send(ctx, e, c.bus.PublishEvent) }

// submitted publishes a new run's run.submitted, before any job of the
// run, without asking for an acknowledgement. The server queues one
// connection's publishes in the order they come, so the event is queued
// for the events stream before a job the coordinator publishes after it
// exists, and so before any event of a worker that runs the job:
// watchers see it first, as with an acknowledgement, which the
// coordinator never waited for and which could only have reported a
// failure to a debug log. One message less from the server a submit.
func (c *Coordinator) submitted(ctx context.Context, e bus.Event) {
	e.Type = "run.submitted"
	c.send(ctx, e, c.bus.PublishProgress)
}

// send stamps e and publishes it with pub.
func (c *Coordinator) send(ctx context.Context, e bus.Event, pub func(context.Context, bus.Event) error) {
	e.Time = time.Now().UTC()
	if err := pub(ctx, e); err != nil {
		c.log.DebugContext(ctx, "event not published", slog.String("type", e.Type), slog.Any("error", err))
	}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// validatePlacement refuses a placement the operator's sandbox policy does
// not allow, as a bad request naming the field ("placement.spec.network:
// …"). Every handler where a placement enters through the API calls it;
// other checks of a placement (snapshots) sit beside it.
func (c *Coordinator) validatePlacement(p session.Placement) error {
	if c.cfg.SandboxPolicy == nil {
		return nil
	}
	if _, err := c.cfg.SandboxPolicy.Check(p); err != nil {
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	return nil
}

// placed reports whether a version names a placement of its own rather
// than none: an unplaced version is stored freely (steps without tools
// need no sandbox), and checked when a run with tools forwards it.
func placed(p session.Placement) bool {
	return p.Backend != "" || !p.Spec.IsZero()
}
