// Package worker runs step jobs: it pulls "forward version V through agent
// A" jobs from JetStream, runs the agent, commits the new version and acks.
//
// # Delivery contract
//
// A worker holds no state that matters after a crash. For each delivery it:
//
//  1. marks the step running (a step that already ended is acked and
//     dropped: a redelivery after a commit, or a canceled run);
//  2. extends the ack deadline with InProgress heartbeats while it works;
//  3. runs the agent and commits the result with the step id as the
//     version's idempotency key, so a redelivered job that already committed
//     gets the same version back instead of a duplicate;
//  4. records the commit on the step, then acks. Where the stores allow it
//     (Postgres: a run store with [StepCommitter] and a graph store that
//     runs statements in a version's commit; SQLite: [ExecStepCommitter]),
//     steps 3 and 4 are one transaction: the version and the step's record
//     commit together.
//
// Transient failures (a model's 429/5xx/timeouts, an unreachable store) NAK
// the job with a growing delay; after the last allowed delivery, or on a
// permanent failure, the step is recorded as failed with its reason, an
// error event is published, and the message is terminated.
//
// # Shutdown
//
// Canceling Run's context stops pulling: the long poll in flight, if
// any, runs out (Config.FetchWait at most) rather than being canceled,
// and a job it receives runs as a step in flight. A canceled poll would
// stay open at the server until its time was up anyway, and a job sent
// to it would have to be handed back, a delivery spent
// ([bus.Consumer.Fetch]). Steps in flight get Config.ShutdownTimeout to
// finish; then their contexts are canceled and their jobs handed back
// with an immediate NAK for another worker.
package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/telemetry"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/memory"
	"github.com/rath-run/rath/pkg/sandbox"
	"github.com/rath-run/rath/pkg/sandbox/policy"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/pgstore"
	"github.com/rath-run/rath/pkg/tool"
	"github.com/rath-run/rath/pkg/tool/builtin"
	"github.com/rath-run/rath/pkg/tool/mcp"
)

// Config configures a Worker. Zero values take the documented defaults.
type Config struct {
	// Name identifies the worker in lineage and logs; default host-pid.
	Name string
	// Queue is the job queue to pull from; default "default".
	Queue string
	// Slots is how many steps run at once; default 4.
	Slots int
	// Heartbeat is the InProgress interval; default 5s. Keep it well under
	// the bus's AckWait.
	Heartbeat time.Duration
	// NoHeartbeat turns the InProgress heartbeats off, so a step longer
	// than the bus's AckWait is redelivered while it runs. It exists as the
	// negative control of the heartbeat tests and for diagnosis; never set
	// it in production.
	NoHeartbeat bool
	// FetchWait bounds one pull request; default 1s.
	FetchWait time.Duration
	// EventLinger is how long a step holds its events so that a step
	// ending within it sends them with its end as one message (see
	// stepEvents); a watcher sees a longer step start at most this late.
	// Default DefaultEventLinger (20ms); negative: every event goes out
	// as it comes.
	EventLinger time.Duration
	// StepTimeout bounds one step unless its spec sets a shorter one;
	// default 10m.
	StepTimeout time.Duration
	// MaxDeliver must equal the bus's MaxDeliver: the delivery on which a
	// transient failure becomes terminal. Default 5.
	MaxDeliver int
	// RetryDelay is the first NAK delay; it doubles per delivery up to 1m.
	// Default 1s.
	RetryDelay time.Duration
	// ShutdownTimeout is how long steps in flight may finish after Run's
	// context ends; default 30s.
	ShutdownTimeout time.Duration
	// Logger defaults to discarding.
	Logger *slog.Logger
	// TracerProvider traces each delivery (a child of the trace context in
	// the job's headers), the agent call and its model and tool calls; nil
	// means no tracing.
	TracerProvider trace.TracerProvider
	// Metrics counts steps, model tokens, tool and sandbox calls; nil
	// records nothing (docs/observability.md).
	Metrics *telemetry.Metrics
	// Memory is the store an agent spec's `memory: local` binds (recalled
	// before a step, committed after it). nil: a step whose spec binds
	// memory fails permanently, naming the field.
	Memory memory.Store
	// Workspaces opens the sandbox of a step whose agent has tools; nil
	// means a [TempWorkspaces] over Sandboxes.
	Workspaces Workspaces
	// Sandboxes holds the sandbox backends the default Workspaces opens;
	// nil means steps run without a sandbox (sandbox tools then fail with
	// error kind no_sandbox).
	Sandboxes *sandbox.Registry
	// SandboxPolicy is the operator's sandbox policy. Before a step with
	// tools opens its workspace, the input's placement is checked against
	// it (a placement it refuses fails the step permanently, naming the
	// field), and an unplaced session's tools run on its default backend.
	// nil checks nothing and runs unplaced sessions on [DefaultBackend]:
	// for programs that are their own operator (tests, embedding);
	// internal/app always sets one.
	SandboxPolicy *policy.Policy
	// Tools are the tools agents may choose by name (spec.tools); nil
	// means the six built-ins and their "builtin" group. Register custom
	// Go tools here (builtin.NewRegistry, then Register).
	Tools *tool.Registry
	// MCP provides the tools of the MCP servers a spec names (spec.mcp),
	// normally an *mcp.Manager; nil means this worker runs none, and a
	// spec naming servers fails. When it is an io.Closer, Run closes it on
	// return, after the steps in flight have ended.
	MCP MCPTools
	// CrashAt, when set, is called at each named point of an agent step
	// (the Crash constants) with the round; a fault test ends the process
	// there. Never set it in production.
	CrashAt func(point string, round int)
}

// MCPTools starts or reuses the MCP servers an agent spec names and returns
// their tools (see package tool/mcp).
type MCPTools interface {
	Tools(ctx context.Context, servers []agent.MCPServer) ([]tool.Tool, error)
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Name == "" {
		host, _ := os.Hostname()
		c.Name = fmt.Sprintf("%s-%d", cmp.Or(host, "worker"), os.Getpid())
	}
	c.Queue = cmp.Or(c.Queue, "default")
	c.Slots = cmp.Or(c.Slots, 4)
	c.Heartbeat = cmp.Or(c.Heartbeat, 5*time.Second)
	c.FetchWait = cmp.Or(c.FetchWait, time.Second)
	c.EventLinger = cmp.Or(c.EventLinger, DefaultEventLinger)
	c.StepTimeout = cmp.Or(c.StepTimeout, 10*time.Minute)
	c.MaxDeliver = cmp.Or(c.MaxDeliver, 5)
	c.RetryDelay = cmp.Or(c.RetryDelay, time.Second)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, 30*time.Second)
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Tools == nil {
		c.Tools = builtin.NewRegistry()
	}
	if c.Workspaces == nil && c.Sandboxes != nil {
		c.Workspaces = &TempWorkspaces{Backends: c.Sandboxes}
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Slots < 1:
		return fmt.Errorf("worker: Slots must be at least 1, got %d", c.Slots)
	case c.MaxDeliver < 1:
		return fmt.Errorf("worker: MaxDeliver must be at least 1, got %d", c.MaxDeliver)
	}
	return nil
}

// Steps is the part of the run store a worker uses.
type Steps interface {
	StartStep(ctx context.Context, stepID, worker string) (runs.Step, error)
	CommitStep(ctx context.Context, stepID string, output session.ID) (runs.Run, error)
	FailStep(ctx context.Context, stepID, reason string) (runs.Run, error)
	// Touch records that a running step is alive, so the coordinator's
	// reconciler does not republish it. It returns runs.ErrTerminal when
	// the step has ended meanwhile (its run was canceled or timed out): the
	// worker then aborts the step; with runs.ErrCommitted too when it
	// ended committed: the worker lets the step finish.
	Touch(ctx context.Context, stepID string) error
}

// Jobs is where a worker pulls deliveries from.
type Jobs interface {
	Fetch(ctx context.Context, n int, maxWait time.Duration) ([]*bus.Delivery, error)
}

// Events is where a worker reports progress: each call publishes one
// run's events, in order, as one message (a batch; bus.Bus.PublishEvents).
// PublishEvents asks for the server's acknowledgement; PublishProgressEvents
// does not, for the events inside a step that the step's end
// (acknowledged, published after them on the same connection) follows.
type Events interface {
	PublishEvents(ctx context.Context, es []bus.Event) error
	PublishProgressEvents(ctx context.Context, es []bus.Event) error
}

// ResolveFunc builds the provider for an agent spec and returns the model
// name to call.
type ResolveFunc func(spec agent.Spec) (llm.Provider, string, error)

// Worker pulls and runs step jobs. Create it with [New]; run it with
// [Worker.Run].
type Worker struct {
	cfg     Config
	graph   session.Graph
	steps   Steps
	jobs    Jobs
	events  Events
	resolve ResolveFunc
	log     *slog.Logger
	aborts  inflight // steps in flight by run, for run abort events (cancel.go)
	targets *targets // parsed job targets (commit.go)
	// inputs reads a step's input with its start, when the stores can
	// (inputsOf); nil otherwise.
	inputs *inputReader
}

// New returns a worker. All dependencies are required.
func New(graph session.Graph, steps Steps, jobs Jobs, events Events, resolve ResolveFunc, cfg Config) (*Worker, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if graph == nil || steps == nil || jobs == nil || events == nil || resolve == nil {
		return nil, errors.New("worker: graph, steps, jobs, events and resolve are required")
	}
	return &Worker{
		cfg: cfg, graph: graph, steps: steps, jobs: jobs, events: events, resolve: resolve, targets: newTargets(),
		log:    cfg.Logger.With(slog.String("worker", cfg.Name), slog.String("queue", cfg.Queue)),
		inputs: inputsOf(graph, steps),
	}, nil
}

// Name returns the worker's name.
func (w *Worker) Name() string { return w.cfg.Name }

// Run pulls and runs jobs until ctx ends, then shuts down gracefully (see the
// package documentation). It returns nil after a graceful shutdown.
func (w *Worker) Run(ctx context.Context) error {
	// Steps run under work, which outlives ctx by ShutdownTimeout.
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	defer w.subscribeAborts()()

	slots := make(chan struct{}, w.cfg.Slots)
	// Each slot is one goroutine for the worker's life, not one per job: a
	// step's goroutine grows its stack deep (the agent loop, the store's
	// driver, the bus), and a fresh goroutine per job copied its stack up
	// from the minimum every time — 4% of a busy dev stack's CPU (issue 25).
	deliveries := make(chan *bus.Delivery)
	var wg sync.WaitGroup
	for range w.cfg.Slots {
		wg.Go(func() { w.serve(work, deliveries, slots, &wg) })
	}
	w.log.InfoContext(ctx, "worker started", slog.Int("slots", w.cfg.Slots))
	for ctx.Err() == nil {
		// Wait for a free slot, then take every other free slot too and
		// pull as many jobs: one pull request, not one per job, when jobs
		// arrive faster than steps end. Fetch never holds a job back to
		// fill a batch, so a step never waits for one.
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		n := 1
		for more := true; more && n < w.cfg.Slots; {
			select {
			case slots <- struct{}{}:
				n++
			default:
				more = false
			}
		}
		// Under work, not ctx: the poll is not canceled at shutdown (see
		// the package documentation).
		ds, err := w.jobs.Fetch(work, n, w.cfg.FetchWait)
		if err != nil && ctx.Err() == nil {
			w.log.WarnContext(ctx, "fetch failed", slog.Any("error", err))
			select {
			case <-time.After(w.cfg.FetchWait):
			case <-ctx.Done():
			}
		}
		for range n - len(ds) { // give back the slots no job took
			<-slots
		}
		for _, d := range ds {
			deliveries <- d // a slot is free for it: it was taken above
		}
	}
	close(deliveries)

	w.log.Info("worker stopping: no new jobs; waiting for steps in flight", slog.Duration("timeout", w.cfg.ShutdownTimeout))
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(w.cfg.ShutdownTimeout):
		w.log.Warn("shutdown timeout: canceling steps in flight and handing their jobs back")
		cancelWork()
		<-done
	}
	if c, ok := w.cfg.MCP.(io.Closer); ok {
		if err := c.Close(); err != nil {
			w.log.Warn("closing MCP servers", slog.Any("error", err))
		}
	}
	w.log.Info("worker stopped")
	return nil
}

// serve is one slot: it runs deliveries until the channel closes, freeing
// the slot after each. When a step's goroutine ends inside handle
// (runtime.Goexit, as a fault test's crash point does), serve frees the
// slot and starts its successor before the goroutine goes.
func (w *Worker) serve(ctx context.Context, deliveries <-chan *bus.Delivery, slots <-chan struct{}, wg *sync.WaitGroup) {
	for d := range deliveries {
		returned := false
		func() {
			defer func() {
				<-slots
				if !returned {
					wg.Go(func() { w.serve(ctx, deliveries, slots, wg) })
				}
			}()
			w.handle(ctx, d)
			returned = true
		}()
	}
}

// handle runs one delivery to its end: ack, nak or term.
func (w *Worker) handle(ctx context.Context, d *bus.Delivery) {
	log := w.log
	if d.Err != nil {
		log.Warn("undecodable job terminated", slog.Any("error", d.Err))
		_ = d.Term(d.Err.Error())
		return
	}
	job := d.Job
	ctx, obs := w.observe(ctx, d)
	log = log.With(slog.String("run_id", job.RunID), slog.String("step_id", job.StepID),
		slog.Uint64("delivery", d.NumDelivered()))
	if !w.cfg.NoHeartbeat {
		stop := d.KeepAlive(ctx, w.cfg.Heartbeat)
		defer stop()
	}

	st, err := w.startStep(ctx, job)
	switch {
	case errors.Is(err, runs.ErrTerminal):
		// Committed before a lost ack, failed, or canceled: nothing to do.
		log.InfoContext(ctx, "step already ended; acking", slog.String("status", string(st.Status)))
		w.ack(ctx, d, log)
		obs.end("acked", nil)
		return
	case errors.Is(err, runs.ErrNotFound):
		log.Warn("job for an unknown step terminated")
		_ = d.Term("unknown step " + job.StepID)
		obs.end("terminated", nil)
		return
	case err != nil:
		err = fmt.Errorf("start step: %w", err)
		obs.end(w.retryOrFail(ctx, d, log, err), err)
		return
	}
	obs.started()
	// The step's events go out together when it ends within the linger.
	ctx, releaseEvents := w.holdEvents(ctx)
	defer releaseEvents()
	// A step whose run ended (canceled, timed out) is aborted at the next
	// heartbeat: its context ends, and the redelivery finds it ended.
	ctx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	defer w.aborts.track(job.RunID, abort)()
	stopTouch := w.touchEvery(ctx, job.StepID, abort)
	defer stopTouch()
	w.progress(ctx, bus.Event{RunID: job.RunID, StepID: job.StepID, Type: "step.started",
		Data: mustJSON(struct {
			Attempt int    `json:"attempt"`
			Worker  string `json:"worker"`
		}{st.Attempts, w.cfg.Name})})

	g, sg := w.graphFor(job, st)
	out, err := w.execute(ctx, job, g, st.Attempts)
	if w.waitIfPaused(ctx, d, log, job, err) {
		obs.end("waiting", nil)
		return
	}
	if w.reviewIfAmbiguous(ctx, d, log, job, err) {
		obs.end("needs_review", nil)
		return
	}
	if err != nil {
		obs.end(w.retryOrFail(ctx, d, log, err), err)
		return
	}
	r, recorded := sg.committed()
	if !recorded {
		cctx, endCommit := w.span(ctx, "store commit", job)
		r, err = w.steps.CommitStep(cctx, job.StepID, out.ID())
		endCommit(err)
		if err != nil {
			// The version is committed; a redelivery finds it by key.
			err = fmt.Errorf("record commit: %w", err)
			obs.end(w.retryOrFail(ctx, d, log, err), err)
			return
		}
	}
	w.crash(CrashAfterCommit, 0)
	// The commit's event, and the run's end when the commit ends the run,
	// go out with what the step holds, acknowledged, in one message.
	w.publish(ctx, append([]bus.Event{{RunID: job.RunID, StepID: job.StepID, Type: "step.committed", Data: mustJSON(committedData(out))}},
		runEnd(r)...)...)
	w.ack(ctx, d, log)
	obs.end("committed", nil)
	log.InfoContext(ctx, "step committed", slog.String("version", out.ID().String()))
}

// inputStarter is a run store whose step start can read the step's input
// too (runs.Store.StartStepReadingInput).
type inputStarter interface {
	StartStepReadingInput(ctx context.Context, stepID, worker string, in *pgstore.InputScan) (runs.Step, error)
}

// inputSeeder is a graph store whose cache takes an input read that way
// (pgstore.Store).
type inputSeeder interface {
	Cached(id session.ID) bool
	SeedInput(in *pgstore.InputScan, epoch int64) (bool, error)
}

// inputReader is a run store and a graph on one database: the store's
// step start reads the step's input, and the graph's cache takes it.
type inputReader struct {
	starter inputStarter
	seeder  inputSeeder
}

// inputsOf returns the inputReader of a worker's stores, or nil when they
// cannot read an input with a start: the run store must start so, and the
// graph take the input and share the store's database (it commits the
// step's version with the step's record, stepCommit's Postgres case).
func inputsOf(graph session.Graph, steps Steps) *inputReader {
	starter, ok := steps.(inputStarter)
	seeder, seeds := graph.(inputSeeder)
	_, puts := graph.(runs.VersionPutter)
	_, commits := steps.(StepCommitter)
	if !ok || !seeds || !puts || !commits {
		return nil
	}
	return &inputReader{starter: starter, seeder: seeder}
}

// startStep starts job's step. When the worker's stores can (w.inputs)
// and the graph's cache lacks the input, the start reads the input as
// well and the cache is seeded with it: the step's read of its input then
// costs no round trip of its own.
func (w *Worker) startStep(ctx context.Context, job bus.Job) (runs.Step, error) {
	input, perr := session.ParseID(job.Input)
	if w.inputs == nil || perr != nil || w.inputs.seeder.Cached(input) {
		return w.steps.StartStep(ctx, job.StepID, w.cfg.Name)
	}
	var in pgstore.InputScan
	st, err := w.inputs.starter.StartStepReadingInput(ctx, job.StepID, w.cfg.Name, &in)
	if err == nil && st.EpochKnown && st.Input == input {
		if _, err := w.inputs.seeder.SeedInput(&in, st.RedactionEpoch); err != nil {
			// The step reads its input itself, and reports this there.
			w.log.DebugContext(ctx, "input read with the start not used", slog.String("step_id", job.StepID), slog.Any("error", err))
		}
	}
	return st, err
}

// committedData is a step.committed event's data: the version, its usage
// and length, why the loop stopped (model, max_tool_rounds or a budget),
// and a selector's choice.
func committedData(out session.Session) committedEvent {
	d := committedEvent{Version: out.ID(), Usage: out.Usage(), Len: out.Len()}
	for _, e := range out.Version().Extras {
		switch e.Key {
		case "loop.stop":
			d.Stop = e.Value
		case "loop.truncated":
			d.Truncated = e.Value
		case "select.choice":
			d.Choice = e.Value
		}
	}
	return d
}

// committedEvent is the data of step.committed. Its fields are in the
// order of their names, as the map it replaced encoded them.
type committedEvent struct {
	Choice    json.RawMessage `json:"choice,omitempty"`
	Len       int             `json:"len"`
	Stop      json.RawMessage `json:"stop,omitempty"`
	Truncated json.RawMessage `json:"truncated,omitempty"`
	Usage     session.Usage   `json:"usage"`
	Version   session.ID      `json:"version"`
}

// touchEvery touches the step in the store every heartbeat until stopped,
// and aborts the step when the store says it has ended (its run was
// canceled or timed out).
func (w *Worker) touchEvery(ctx context.Context, stepID string, abort context.CancelCauseFunc) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(w.cfg.Heartbeat)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				err := w.steps.Touch(ctx, stepID)
				if errors.Is(err, runs.ErrCommitted) {
					// Committed: by this delivery, whose commit this touch
					// crossed (aborting now would cancel it after the
					// database applied it, and its events would be lost),
					// or by another, which this one's commit finds as a
					// replay. Nothing is left to keep alive.
					w.log.Debug("step committed; no more heartbeats", slog.String("step_id", stepID))
					return
				}
				if errors.Is(err, runs.ErrTerminal) {
					w.log.Info("step ended by its run; aborting", slog.String("step_id", stepID), slog.Any("reason", err))
					abort(err)
					return
				}
				if err != nil && ctx.Err() == nil {
					w.log.Debug("touch step", slog.String("step_id", stepID), slog.Any("error", err))
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

// execute runs the job's target (flow.ParseTarget: an agent spec, or a
// selector or compressor call) on its input in g and commits the result.
// attempt is the step's attempt as StartStep counted it (1 for its first
// start), which says whether it can have a journal to resume from.
func (w *Worker) execute(ctx context.Context, job bus.Job, g session.Graph, attempt int) (session.Session, error) {
	call, err := w.targets.parse(job.Target)
	if err != nil {
		return session.Session{}, permanent(err)
	}
	spec := call.Agent
	if call.Kind == flow.KindVerify {
		return w.verify(ctx, job, call, g)
	}
	provider, model, err := w.resolve(spec)
	if err != nil {
		return session.Session{}, permanent(fmt.Errorf("resolve model %q: %w", spec.Model, err))
	}
	provider = w.traceProvider(provider, model)
	input, err := session.ParseID(job.Input)
	if err != nil {
		return session.Session{}, permanent(err)
	}
	timeout := w.cfg.StepTimeout
	if t := time.Duration(spec.Limits.TimeoutSeconds * float64(time.Second)); t > 0 && t < timeout {
		timeout = t
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	s, err := openInput(ctx, g, input)
	if err != nil {
		return session.Session{}, err
	}
	if call.Kind != flow.KindAgent {
		// Selector and compressor calls: one model call each, shared with
		// the in-process runtime.
		env := flow.Env{
			Resolve:  func(agent.Spec) (llm.Provider, string, error) { return provider, model, nil },
			Producer: session.Producer{Run: job.RunID, Step: job.StepID, Worker: w.cfg.Name},
		}
		if b := job.Budget; b != nil {
			env.Budget = agent.Budget{MaxTokens: b.MaxTokens, UsedTokens: b.UsedTokens, MaxCostUSD: b.MaxCostUSD, UsedCostUSD: b.UsedCostUSD}
		}
		name := spec.Name
		if name == "" {
			name = string(call.Kind)
		}
		ctx, span := w.invokeSpan(ctx, job, name, model)
		env.Producer.TraceID = telemetry.TraceID(ctx)
		out, err := flow.Execute(ctx, env, job.StepID, call, s)
		w.agentDone(span, out, err)
		return out, err
	}
	return w.step(ctx, job, spec, provider, model, s, attempt)
}

// openInput opens a step's input session; an input that is not in the
// graph fails the step for good (no redelivery will find it).
func openInput(ctx context.Context, g session.Graph, input session.ID) (session.Session, error) {
	s, err := session.Open(ctx, g, input)
	if errors.Is(err, session.ErrNotFound) {
		return session.Session{}, permanent(err)
	}
	return s, err
}

// verify runs a rollout branch's verifier (flow.KindVerify) in the
// sandbox of the branch's workspace, under the same operator policy as an
// agent step's tools, and commits its score. No model is called.
func (w *Worker) verify(ctx context.Context, job bus.Job, call flow.Call, g session.Graph) (session.Session, error) {
	input, err := session.ParseID(job.Input)
	if err != nil {
		return session.Session{}, permanent(err)
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.StepTimeout)
	defer cancel()
	s, err := openInput(ctx, g, input)
	if err != nil {
		return session.Session{}, err
	}
	if w.cfg.Workspaces == nil {
		return session.Session{}, permanent(fmt.Errorf("verify %s: this worker opens no sandboxes", call.Agent.Name))
	}
	env := flow.Env{
		Resolve: func(agent.Spec) (llm.Provider, string, error) {
			return nil, "", errors.New("a verifier calls no model")
		},
		Producer: session.Producer{Run: job.RunID, Step: job.StepID, Worker: w.cfg.Name},
		Workspace: func(ctx context.Context, in *session.Version) (sandbox.Sandbox, func(context.Context, bool) (session.Placement, error), error) {
			placed, _, err := w.placed(in)
			if err != nil {
				return nil, nil, permanent(fmt.Errorf("verify %s: %w", call.Agent.Name, err))
			}
			sb, done, err := w.cfg.Workspaces.Open(ctx, placed)
			if err != nil {
				return nil, nil, err
			}
			return sb, done, nil
		},
	}
	out, err := flow.Execute(ctx, env, job.StepID, call, s)
	if errors.Is(err, flow.ErrBadVerifierOutput) {
		return out, permanent(err)
	}
	return out, err
}

// placed checks in's placement against the operator's sandbox policy and
// returns the version the workspace opens: in itself, or for an unplaced
// session a copy placed on the policy's default backend (unplaced is then
// true). A refusal wraps policy.ErrNotAllowed and names the field.
func (w *Worker) placed(in *session.Version) (*session.Version, bool, error) {
	if w.cfg.SandboxPolicy == nil {
		return in, false, nil
	}
	backend, err := w.cfg.SandboxPolicy.Check(in.Placement)
	if err != nil {
		return nil, false, err
	}
	if in.Placement.Backend != "" {
		return in, false, nil
	}
	cp := *in
	cp.Placement.Backend = backend
	return &cp, true, nil
}

// step runs the agent loop with the spec's tools and, when it has any, a
// sandbox from Workspaces; the committed version records the placement the
// workspace hands back.
func (w *Worker) step(ctx context.Context, job bus.Job, spec agent.Spec, provider llm.Provider, model string, s session.Session, attempt int) (session.Session, error) {
	tools, err := w.cfg.Tools.Select(spec.Tools)
	if err != nil {
		return session.Session{}, permanent(fmt.Errorf("agent %s: %w", spec.Name, err))
	}
	if len(spec.MCP) > 0 {
		if tools, err = w.withMCP(ctx, spec, tools); err != nil {
			return session.Session{}, err
		}
	}
	if tools, err = w.traceTools(tools); err != nil {
		return session.Session{}, permanent(fmt.Errorf("agent %s: %w", spec.Name, err))
	}
	tokens := newTokenBatcher(tokenEvery, func(text string) {
		w.progress(ctx, bus.Event{RunID: job.RunID, StepID: job.StepID, Type: "step.token",
			Data: mustJSON(struct {
				Text string `json:"text"`
			}{text})})
	})
	// The step's last text goes out before the worker publishes its end.
	defer tokens.flush()
	meta := agent.Meta{
		Key:      job.StepID,
		Producer: session.Producer{Run: job.RunID, Step: job.StepID, Worker: w.cfg.Name},
		OnDelta:  tokens.add,
		OnEvent: func(e agent.Event) {
			tokens.flush()
			w.progress(ctx, bus.Event{RunID: job.RunID, StepID: job.StepID, Type: "step." + strings.ReplaceAll(e.Type, ".", "_"),
				Data: mustJSON(e)})
		},
	}
	if b := job.Budget; b != nil {
		meta.Run = agent.Budget{MaxTokens: b.MaxTokens, UsedTokens: b.UsedTokens, MaxCostUSD: b.MaxCostUSD, UsedCostUSD: b.UsedCostUSD}
	}
	j, err := w.journalFor(ctx, job.StepID, attempt)
	if err != nil {
		return session.Session{}, fmt.Errorf("agent %s: %w", spec.Name, err)
	}
	if j != nil {
		meta.Journal = j
		if sg, ok := s.Graph().(*stepGraph); ok {
			sg.journal = j
		}
	}
	if tools.Len() > 0 && w.cfg.Workspaces != nil {
		in, unplaced, err := w.placed(s.Version())
		if err != nil {
			return session.Session{}, permanent(fmt.Errorf("agent %s: %w", spec.Name, err))
		}
		var sb sandbox.Sandbox
		var done DoneFunc
		rctx, endRestore := w.span(ctx, "workspace restore", job)
		if cw, ok := w.cfg.Workspaces.(CheckpointWorkspaces); ok && j != nil {
			// A resumed step's workspace starts where its last recorded
			// round left it.
			_, from := agent.LastSnapshot(j.loaded)
			sb, done, meta.Checkpoint, err = cw.OpenFrom(rctx, in, from)
		} else {
			sb, done, err = w.cfg.Workspaces.Open(rctx, in)
		}
		endRestore(err)
		if err != nil {
			return session.Session{}, fmt.Errorf("open workspace: %w", err)
		}
		finished := false
		defer func() {
			if !finished {
				if _, err := done(context.WithoutCancel(ctx), false); err != nil {
					w.log.Warn("release workspace", slog.String("step_id", job.StepID), slog.Any("error", err))
				}
			}
		}()
		meta.Sandbox = sb
		meta.Network = sandboxNetwork(in.Placement)
		meta.Placement = func(ctx context.Context) (session.Placement, error) {
			w.crash(CrashBeforeCommit, 0)
			finished = true
			sctx, endSnapshot := w.span(ctx, "workspace snapshot", job)
			p, err := done(sctx, true)
			endSnapshot(err)
			if err != nil {
				return p, fmt.Errorf("close workspace: %w", err)
			}
			if unplaced {
				// The session stays unplaced: it runs on whatever default
				// the operator's policy names when its next step runs.
				p.Backend = ""
			}
			return p, nil
		}
	}
	a := &agent.Agent{Spec: spec, Provider: provider, Model: model, Tools: tools}
	if st := spec.Memory.Store; st != "" {
		switch {
		case st != "local":
			return session.Session{}, permanent(fmt.Errorf("agent %s: memory.store %q: this deployment serves only \"local\"", spec.Name, st))
		case w.cfg.Memory == nil:
			return session.Session{}, permanent(fmt.Errorf("agent %s: memory.store local: this worker has no memory store", spec.Name))
		}
		a.Memory = w.cfg.Memory
		if spec.Memory.Commit {
			// The step commits memory after its version: record the step
			// committed only after that (CommitStep), so a crash between the
			// two redelivers the step and the replay commits the memory.
			commitsPlainly(s)
		}
	}
	ctx, span := w.invokeAgent(ctx, job, spec, model, &meta)
	out, err := a.Step(ctx, s, meta)
	w.agentDone(span, out, err)
	return out, err
}

// withMCP adds the tools of the spec's MCP servers to tools. A command the
// worker does not allow, or a worker without MCP, fails the step for good;
// a server that fails to start is retried with the step.
func (w *Worker) withMCP(ctx context.Context, spec agent.Spec, tools *tool.Set) (*tool.Set, error) {
	if w.cfg.MCP == nil {
		return nil, permanent(fmt.Errorf("agent %s: mcp: this worker runs no MCP servers", spec.Name))
	}
	extra, err := w.cfg.MCP.Tools(ctx, spec.MCP)
	if err != nil {
		err = fmt.Errorf("agent %s: %w", spec.Name, err)
		if errors.Is(err, mcp.ErrNotAllowed) {
			return nil, permanent(err)
		}
		return nil, err
	}
	set, err := tool.NewSet(append(tools.Tools(), extra...)...)
	if err != nil {
		return nil, permanent(fmt.Errorf("agent %s: mcp: %w", spec.Name, err))
	}
	return set, nil
}

// retryOrFail NAKs a transient failure with backoff, or records a terminal
// one and terminates the message; a step aborted because its run ended is
// acked. It returns what it did: retry, failed, handed_back or aborted.
func (w *Worker) retryOrFail(ctx context.Context, d *bus.Delivery, log *slog.Logger, err error) (outcome string) {
	n := d.NumDelivered()
	if cause := context.Cause(ctx); ctx.Err() != nil && errors.Is(cause, runs.ErrTerminal) {
		// Aborted because its run ended (canceled or timed out): the store
		// already has the step canceled, so the job is done.
		log.InfoContext(ctx, "step aborted: its run ended", slog.Any("reason", cause))
		w.ack(ctx, d, log)
		return "aborted"
	}
	if ctx.Err() != nil && !isPermanent(err) {
		// Shutting down: hand the job straight back to another worker.
		log.InfoContext(ctx, "handing step back on shutdown", slog.Any("error", err))
		_ = d.Nak(0)
		return "handed_back"
	}
	if !isPermanent(err) && int(n) < w.cfg.MaxDeliver {
		delay := min(w.cfg.RetryDelay<<min(n-1, 6), time.Minute)
		log.WarnContext(ctx, "step failed; will retry", slog.Any("error", err), slog.Duration("delay", delay))
		_ = d.Nak(delay)
		return "retry"
	}
	if !isPermanent(err) && pgstore.IsUnavailable(err) {
		// The last delivery met a database outage: that is not the step's
		// failure, and it could not be recorded anyway. Remove the job; the
		// coordinator's reconciler republishes the stale step (fresh
		// deliveries) once the database is back.
		log.WarnContext(ctx, "store unavailable on the last delivery; leaving the step to the reconciler", slog.Any("error", err))
		_ = d.Term("store unavailable")
		return "retry"
	}
	reason := err.Error()
	if !isPermanent(err) {
		reason = fmt.Sprintf("gave up after %d deliveries: %s", n, reason)
	}
	log.ErrorContext(ctx, "step failed", slog.String("reason", reason))
	bg := context.WithoutCancel(ctx)
	r, ferr := w.steps.FailStep(bg, d.Job.StepID, reason)
	if ferr != nil {
		log.Error("record step failure", slog.Any("error", ferr))
		if int(n) >= w.cfg.MaxDeliver {
			// JetStream will not deliver this job again: a nak would strand
			// the step, unrecorded, behind a job nobody receives. Remove the
			// job instead; the coordinator's reconciler finds the step stale
			// with no job queued and publishes it again (a fresh message id,
			// fresh deliveries), so the step runs or fails on the record.
			_ = d.Term("step failure not recorded")
			return "retry"
		}
		// Leave the message for redelivery so the failure is recorded later.
		_ = d.Nak(w.cfg.RetryDelay)
		return "retry"
	}
	w.publish(bg, append([]bus.Event{{RunID: d.Job.RunID, StepID: d.Job.StepID, Type: "step.failed",
		Data: mustJSON(map[string]string{"error": reason})}}, runEnd(r)...)...)
	_ = d.Term(reason)
	return "failed"
}

// runEnd returns the run's end event when r has ended, else none.
func runEnd(r runs.Run) []bus.Event {
	if !r.Status.Terminal() {
		return nil
	}
	typ := "run." + string(r.Status)
	if r.Status == runs.RunSucceeded {
		typ = "run.completed"
	}
	return []bus.Event{{RunID: r.ID, Type: typ, Data: mustJSON(map[string]any{"output": r.Output, "error": r.Error})}}
}

// ack settles a delivery whose outcome the store has recorded (committed,
// failed, waiting, needs review, ended before it started), without waiting
// for the server's confirmation: a lost ack costs a redelivery, which
// finds the step ended and acks again, not a wait on every step.
func (w *Worker) ack(ctx context.Context, d *bus.Delivery, log *slog.Logger) {
	if err := d.AckNoWait(); err != nil {
		log.WarnContext(ctx, "ack failed", slog.Any("error", err))
	}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func permanent(err error) error { return &permanentError{err: err} }

// isPermanent reports whether retrying cannot help.
func isPermanent(err error) bool {
	var p *permanentError
	switch {
	case errors.As(err, &p), errors.Is(err, llm.ErrPermanent), errors.Is(err, llm.ErrScriptExhausted),
		errors.Is(err, agent.ErrToolsUnavailable), errors.Is(err, agent.ErrInvalidSpec),
		errors.Is(err, session.ErrInvalidChunk), errors.Is(err, session.ErrTooLarge),
		errors.Is(err, flow.ErrInvalidCall), errors.Is(err, flow.ErrBadReply), errors.Is(err, flow.ErrBudgetExceeded),
		errors.Is(err, agent.ErrAmbiguous), errors.Is(err, agent.ErrReviewFailed):
		return true
	}
	return false
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}
