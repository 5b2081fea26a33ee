package coordinator

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/rath-run/rath/internal/auth"
	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/telemetry"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/flowfile"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/store/sqlitestore"
)

// Scope is whom a call acts for: a tenant, the caller within it, and the
// graph and run stores confined to the tenant's rows. The auth middleware
// resolves it once per request (Coordinator.auth, bindTenant) and the
// handlers pass it on; system work (the workflow driver, the reconciler)
// acts as the coordinator's own scope, which sees every row. A service
// method reads and writes only through its scope's stores, never through
// stores it finds elsewhere.
type Scope struct {
	// Tenant is the tenant's name; auth.DefaultTenant for the system and
	// for requests when authentication is off.
	Tenant string
	// Principal is who calls (approvals record it); zero for system work
	// and when authentication is off.
	Principal auth.Principal
	// Graph and Runs are the tenant's stores.
	Graph store.Store
	Runs  *runs.Store
	// pooled marks a tenant's own confined pools (TenantStores): its
	// memory and retention are then the tenant's too (memoryOf,
	// retentionOf), not the coordinator's.
	pooled bool
}

// SystemScope is the scope of the coordinator's own work: its own stores,
// unconfined.
func (c *Coordinator) SystemScope() Scope {
	return Scope{Tenant: auth.DefaultTenant, Graph: c.sysGraph, Runs: c.runs}
}

type scopeKey struct{}

// withScope returns ctx carrying sc (the auth middleware binds it).
func withScope(ctx context.Context, sc Scope) context.Context {
	return context.WithValue(ctx, scopeKey{}, sc)
}

// scopeOf returns the scope the auth middleware bound to ctx; a context it
// did not pass through (system work, a test calling a handler directly)
// acts as the system.
func (c *Coordinator) scopeOf(ctx context.Context) Scope {
	if sc, ok := ctx.Value(scopeKey{}).(Scope); ok {
		return sc
	}
	return c.SystemScope()
}

// RunService is the run half of the coordinator: submit (agent and
// workflow runs), cancel, decide (approvals) and a workflow run's steps
// (put, get, wait, complete, fail). Every method takes the caller's Scope;
// the HTTP handlers are thin callers that decode a request, call one
// method with the scope the auth middleware resolved, and encode the
// answer. The workflow driver calls it with the system scope.
type RunService struct {
	c *Coordinator
}

// Runs returns the coordinator's run service.
func (c *Coordinator) Runs() *RunService { return c.runSvc }

// Submit submits a run as the system (no tenant; tests and tools): the
// run service's Submit with [Coordinator.SystemScope].
func (c *Coordinator) Submit(ctx context.Context, req SubmitRequest) (runs.Run, error) {
	return c.runSvc.Submit(ctx, c.SystemScope(), req)
}

// Complete ends a client-driven workflow run with output, a version the
// scope's graph holds.
func (svc *RunService) Complete(ctx context.Context, sc Scope, runID string, output session.ID) (runs.Run, error) {
	if _, err := sc.Graph.Get(ctx, output); err != nil {
		if errors.Is(err, session.ErrNotFound) {
			return runs.Run{}, badRequest("output: no version %s", output)
		}
		return runs.Run{}, err
	}
	run, err := sc.Runs.Complete(ctx, runID, output)
	if err != nil {
		return runs.Run{}, err
	}
	svc.c.event(ctx, runEndEvent(run))
	return run, nil
}

// Fail ends a client-driven workflow run as failed with reason.
func (svc *RunService) Fail(ctx context.Context, sc Scope, runID, reason string) (runs.Run, error) {
	run, err := sc.Runs.FailRun(ctx, runID, reason)
	if err != nil {
		return runs.Run{}, err
	}
	svc.c.event(ctx, runEndEvent(run))
	return run, nil
}

// Submit validates a request, records the run and its first step, and
// publishes the step's job. A publish failure leaves the step pending for the
// reconciler; the run is durable once Submit returns.
//
// The submission is the run's span ("run agent", "run workflow"), a child
// of ctx's span (the request's, continuing the caller's traceparent); the
// run records its traceparent, and every step it publishes is its child
// (package telemetry, "A run is one trace").
func (svc *RunService) Submit(ctx context.Context, sc Scope, req SubmitRequest) (runs.Run, error) {
	kind := runs.KindAgent
	if req.Driver != "" || req.Workflow != "" {
		kind = runs.KindWorkflow
	}
	ctx, span := telemetry.StartRun(ctx, svc.c.cfg.TracerProvider, string(kind))
	var r runs.Run
	var err error
	if kind == runs.KindWorkflow {
		r, err = svc.submitWorkflow(ctx, sc, req)
	} else {
		r, err = svc.submitAgent(ctx, sc, req)
	}
	if err == nil {
		span.SetAttributes(telemetry.AttrRunID.String(r.ID), telemetry.AttrGenAIConversation.String(r.Conversation))
	}
	endSpan(span, err)
	return r, err
}

func (svc *RunService) submitAgent(ctx context.Context, sc Scope, req SubmitRequest) (runs.Run, error) {
	c := svc.c
	if len(req.Agent) == 0 {
		return runs.Run{}, badRequest("agent: required")
	}
	spec, target, err := c.specs.parse(req.Agent)
	if err != nil {
		return runs.Run{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if spec.ScriptFile != "" {
		return runs.Run{}, badRequest("agent.script_file: the coordinator cannot read your files; inline the replies as script (rathctl does this)")
	}
	if err := c.checkOffer(spec); err != nil {
		return runs.Run{}, fmt.Errorf("%w: agent.%w", ErrBadRequest, err)
	}
	if err := req.Budget.Validate(); err != nil {
		return runs.Run{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	queue := cmp.Or(req.Queue, c.cfg.Queue)
	if err := bus.ValidQueue(queue); err != nil {
		return runs.Run{}, fmt.Errorf("%w: queue: %w", ErrBadRequest, err)
	}
	r := runs.Run{ID: runs.NewRunID(), Queue: queue, Target: target, Budget: req.Budget, TraceContext: telemetry.TraceParent(ctx)}
	if r.Deadline, err = parseTimeout(req.Timeout); err != nil {
		return runs.Run{}, err
	}
	if spec.Sandbox != nil {
		// The spec places the input session (docs/sandboxes.md): checked
		// here, at submit, naming the agent's field.
		if c.cfg.SandboxPolicy != nil {
			if _, err := c.cfg.SandboxPolicy.Check(spec.Sandbox.Placement()); err != nil {
				return runs.Run{}, fmt.Errorf("%w: agent.sandbox: %w", ErrBadRequest, err)
			}
		}
	} else if req.Message != "" && (len(spec.Tools) > 0 || len(spec.MCP) > 0) {
		// A new session is unplaced: its tools run on the policy's default.
		if err := c.validatePlacement(session.Placement{}); err != nil {
			return runs.Run{}, err
		}
	}
	var input session.ID
	switch {
	case req.Message != "" && req.Session != "":
		return runs.Run{}, badRequest("give message or session, not both")
	case req.Message != "" && c.cfg.SameDatabase && spec.Sandbox == nil:
		if err := svc.createWithMessage(ctx, sc, &r, req.Message); err != nil {
			return runs.Run{}, err
		}
		input = r.Input
	case req.Message != "":
		s, err := session.FromUserMessage(ctx, sc.Graph, req.Message)
		if err != nil {
			return runs.Run{}, fmt.Errorf("create session: %w", err)
		}
		input = s.ID()
		r.Conversation = input.String()
	case req.Session != "":
		id, err := session.ParseID(req.Session)
		if err != nil {
			return runs.Run{}, badRequest("session: %v", err)
		}
		in, err := sc.Graph.Get(ctx, id)
		if err != nil {
			if errors.Is(err, session.ErrNotFound) {
				return runs.Run{}, badRequest("session: no version %s", id)
			}
			return runs.Run{}, err
		}
		// The placement was checked when it entered; the policy may have
		// changed since, and an unplaced session's tools run on its
		// default backend.
		if spec.Sandbox == nil && (len(spec.Tools) > 0 || len(spec.MCP) > 0 || placed(in.Placement)) {
			if err := c.validatePlacement(in.Placement); err != nil {
				return runs.Run{}, fmt.Errorf("session %s: %w", id, err)
			}
		}
		input = id
		r.Conversation = conversationOf(ctx, sc.Graph, id).String()
	default:
		return runs.Run{}, badRequest("message or session: one is required")
	}
	if spec.Sandbox != nil {
		if input, err = svc.placeInput(ctx, sc, input, spec.Sandbox.Placement(), ""); err != nil {
			return runs.Run{}, err
		}
	}
	if r.Steps == nil {
		r.Input = input
		if err := sc.Runs.Create(ctx, &r, []runs.Step{{Ordinal: 0, Input: input}}); err != nil {
			return runs.Run{}, fmt.Errorf("record run: %w", err)
		}
	}
	st := r.Steps[0]
	// run.submitted goes out before the step's job: a worker's step events
	// must not come first in the run's stream (a watcher from the start
	// would be told that the run's first events are missing).
	c.submitted(ctx, bus.Event{RunID: r.ID, Data: mustJSON(map[string]any{"input": input, "agent": spec.Name})})
	if err := c.publishCommitted(ctx, sc.Graph, r, st, st.ID); err != nil {
		c.log.WarnContext(ctx, "publish failed; the reconciler will retry", slog.String("step_id", st.ID), slog.Any("error", err))
	}
	return r, nil
}

// createWithMessage records a new session holding text and the run r
// forwarding it (r.Input is set) in one transaction of the graph store,
// whose database also holds the run store (Config.SameDatabase): one commit
// to wait for instead of two. A crash before the commit leaves neither; after
// it, a pending step the reconciler republishes, as with two commits.
func (svc *RunService) createWithMessage(ctx context.Context, sc Scope, r *runs.Run, text string) error {
	v, err := session.Root(session.User(text))
	if err != nil {
		return fmt.Errorf("submit: create session: %w", err)
	}
	r.Input = v.ID
	r.Conversation = r.Input.String()
	if err := svc.putWithRun(ctx, sc, v, r, []runs.Step{{Ordinal: 0, Input: r.Input}}); err != nil {
		r.Input, r.Steps = session.ID{}, nil
		return fmt.Errorf("submit: %w", err)
	}
	return nil
}

// execPutter is a graph store that can run statements in a new version's
// write transaction: the SQLite store ([sqlitestore.Store.PutExec]).
type execPutter interface {
	PutExec(ctx context.Context, v *session.Version, after func(ctx context.Context, ex sqlitestore.Execer) error) (*session.Version, error)
}

// putWithRun commits the new version v and the run r with its steps
// atomically, the cheapest way the graph store offers.
func (svc *RunService) putWithRun(ctx context.Context, sc Scope, v *session.Version, r *runs.Run, steps []runs.Step) error {
	record := func(ctx context.Context, ex runs.Execer) error {
		if err := sc.Runs.CreateIn(ctx, ex, r, steps); err != nil {
			return fmt.Errorf("record run: %w", err)
		}
		return nil
	}
	switch g := sc.Graph.(type) {
	case runs.VersionPutter:
		// Postgres: the version's rows and the run's in one pipelined
		// batch, one round trip.
		_, ran, err := g.PutWith(ctx, v, svc.c.runs.CreateStmts(r, steps)...)
		if err == nil && !ran {
			// A fresh random id cannot have been committed before.
			err = fmt.Errorf("version %s already existed", v.ID)
		}
		return err
	case execPutter:
		// SQLite: the version's rows and the run's in one write
		// transaction, without Tx's savepoints.
		_, err := g.PutExec(ctx, v, func(ctx context.Context, ex sqlitestore.Execer) error { return record(ctx, ex) })
		return err
	}
	return sc.Graph.Tx(ctx, func(ctx context.Context, tx store.TxStore) error {
		ex, ok := tx.(runs.Execer)
		if !ok {
			return fmt.Errorf("record run: the graph store's transaction %T cannot hold it (Config.SameDatabase)", tx)
		}
		if _, err := tx.Put(ctx, v); err != nil {
			return fmt.Errorf("create session: %w", err)
		}
		return record(ctx, ex)
	})
}

// Cancel cancels a run.
func (svc *RunService) Cancel(ctx context.Context, sc Scope, runID string) (runs.Run, error) {
	c := svc.c
	r, err := sc.Runs.Cancel(ctx, runID)
	if err != nil {
		return runs.Run{}, err
	}
	c.event(ctx, bus.Event{RunID: r.ID, Type: "run.canceled"})
	return r, nil
}

// placeInput returns the version of id placed on p: id itself when it is
// there already, else a new version with op place (its workspace snapshot
// travels with it, as [session.Session.To] keeps it), committed under key
// when key is set ([session.Session.ToKeyed]).
func (svc *RunService) placeInput(ctx context.Context, sc Scope, id session.ID, p session.Placement, key string) (session.ID, error) {
	s, err := session.Open(ctx, sc.Graph, id)
	if err != nil {
		return session.ID{}, fmt.Errorf("open the input session %s: %w", id, err)
	}
	if flow.SamePlace(s.Placement(), p) {
		return id, nil
	}
	placed, err := s.ToKeyed(ctx, p, key)
	if err != nil {
		return session.ID{}, fmt.Errorf("place the input session %s: %w", id, err)
	}
	return placed.ID(), nil
}

// submitWorkflow records a workflow run: driven by the client (Driver
// "client") or by this coordinator (Workflow holds the file).
func (svc *RunService) submitWorkflow(ctx context.Context, sc Scope, req SubmitRequest) (runs.Run, error) {
	c := svc.c
	r := runs.Run{ID: runs.NewRunID(), Kind: runs.KindWorkflow, Budget: req.Budget, TraceContext: telemetry.TraceParent(ctx)}
	switch {
	case len(req.Agent) > 0:
		return runs.Run{}, badRequest("agent: not allowed with driver or workflow (steps carry their own calls)")
	case req.Workflow != "" && req.Driver != "" && req.Driver != runs.DriverCoordinator:
		return runs.Run{}, badRequest("driver: %q with workflow; a workflow file is driven by the coordinator", req.Driver)
	case req.Workflow != "":
		f, err := flowfile.Parse("workflow", []byte(req.Workflow), nil)
		if err != nil {
			return runs.Run{}, fmt.Errorf("%w: workflow: %w", ErrBadRequest, err)
		}
		if _, err := f.Build(); err != nil {
			return runs.Run{}, fmt.Errorf("%w: workflow: %w", ErrBadRequest, err)
		}
		// Each agent's sandbox block places its steps' inputs: refused
		// here, naming the block's field and line, when the operator's
		// policy does not allow it (PutStep checks it again).
		if p := c.cfg.SandboxPolicy; p != nil {
			if err := f.CheckSandboxes("workflow", func(sb agent.Sandbox) error {
				_, err := p.Check(sb.Placement())
				return err
			}); err != nil {
				return runs.Run{}, fmt.Errorf("%w: workflow: %w", ErrBadRequest, err)
			}
		}
		// Each agent's tools and MCP servers: refused here, naming the
		// field and its line, when the workers do not offer them.
		if err := f.CheckAgents("workflow", c.checkOffer); err != nil {
			return runs.Run{}, fmt.Errorf("%w: workflow: %w", ErrBadRequest, err)
		}
		r.Driver, r.Workflow = runs.DriverCoordinator, req.Workflow
		r.Target = mustJSON(map[string]string{"workflow": f.Name})
	case req.Driver == runs.DriverClient:
		r.Driver = runs.DriverClient
		r.Target = json.RawMessage(`{"driver":"client"}`)
	default:
		return runs.Run{}, badRequest("driver: %q: want \"client\" (or give workflow)", req.Driver)
	}
	if err := req.Budget.Validate(); err != nil {
		return runs.Run{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	queue := req.Queue
	if queue == "" {
		queue = c.cfg.Queue
	}
	if err := bus.ValidQueue(queue); err != nil {
		return runs.Run{}, fmt.Errorf("%w: queue: %w", ErrBadRequest, err)
	}
	r.Queue = queue
	var err error
	if r.Deadline, err = parseTimeout(req.Timeout); err != nil {
		return runs.Run{}, err
	}
	graph, rs := sc.Graph, sc.Runs
	switch {
	case req.Message != "" && req.Session != "":
		return runs.Run{}, badRequest("give message or session, not both")
	case req.Message != "":
		s, err := session.FromUserMessage(ctx, graph, req.Message)
		if err != nil {
			return runs.Run{}, fmt.Errorf("create session: %w", err)
		}
		r.Input = s.ID()
		r.Conversation = r.Input.String()
	case req.Session != "":
		id, err := session.ParseID(req.Session)
		if err != nil {
			return runs.Run{}, badRequest("session: %v", err)
		}
		if _, err := graph.Get(ctx, id); err != nil {
			if errors.Is(err, session.ErrNotFound) {
				return runs.Run{}, badRequest("session: no version %s", id)
			}
			return runs.Run{}, err
		}
		r.Input = id
		r.Conversation = conversationOf(ctx, graph, id).String()
	default:
		return runs.Run{}, badRequest("message or session: one is required")
	}
	if err := rs.Create(ctx, &r, nil); err != nil {
		return runs.Run{}, fmt.Errorf("record run: %w", err)
	}
	c.submitted(ctx, bus.Event{RunID: r.ID, Data: mustJSON(map[string]any{"input": r.Input, "driver": r.Driver})})
	if r.Driver == runs.DriverCoordinator {
		c.driver.kick()
	}
	return r, nil
}

// PutStep records the step key of a workflow run and publishes its job
// when it is new (or still pending: the bus drops a duplicate). A key that
// exists returns the stored step, with its output once committed. Before
// a new step, the run's budget is checked: a run that has spent it fails
// ("budget: …") and the step is refused with runs.ErrTerminal.
func (svc *RunService) PutStep(ctx context.Context, sc Scope, runID, key string, raw json.RawMessage, input session.ID) (runs.Step, error) {
	c := svc.c
	rs := sc.Runs
	if err := runs.ValidKey(key); err != nil {
		return runs.Step{}, fmt.Errorf("%w: key: %w", ErrBadRequest, err)
	}
	call, err := flow.ParseTarget(raw)
	if err != nil {
		return runs.Step{}, fmt.Errorf("%w: call: %w", ErrBadRequest, err)
	}
	// The digest of what the driver asks for now, before the input is
	// placed: a re-executed driver must ask for the same to get the
	// recorded step back. Reading the input's identity is also the check
	// that the input exists (in the caller's tenant).
	ident, err := flow.InputIdentity(ctx, sc.Graph, input)
	if err != nil {
		if errors.Is(err, session.ErrNotFound) {
			return runs.Step{}, badRequest("input: no version %s", input)
		}
		return runs.Step{}, err
	}
	digest, err := flow.StepDigest(call, ident)
	if err != nil {
		return runs.Step{}, err
	}
	reads := c.readsFor(rs)
	if existing, err := reads.GetStep(ctx, runs.KeyedStepID(runID, key)); err == nil {
		if err := svc.checkReplayed(ctx, sc, existing, digest); err != nil {
			return runs.Step{}, err
		}
		if existing.Status == runs.StepPending {
			svc.republish(ctx, sc, reads, runID, existing)
		}
		return stepOutcome(ctx, reads, existing)
	} else if !errors.Is(err, runs.ErrNotFound) {
		return runs.Step{}, err
	}
	if call.Agent.ScriptFile != "" {
		return runs.Step{}, badRequest("call.agent.script_file: the coordinator cannot read your files; inline the replies as script")
	}
	if call.Kind == flow.KindAgent {
		if err := c.checkOffer(call.Agent); err != nil {
			return runs.Step{}, fmt.Errorf("%w: call.agent.%w", ErrBadRequest, err)
		}
	}
	// An agent step whose spec has a sandbox block runs on it: its input
	// is placed there first (below), within the operator's policy.
	place, placed := call.Placement()
	if pol := c.cfg.SandboxPolicy; placed && pol != nil {
		if _, err := pol.Check(place); err != nil {
			return runs.Step{}, fmt.Errorf("%w: call.agent.sandbox: %w", ErrBadRequest, err)
		}
	}
	target, err := json.Marshal(call)
	if err != nil {
		return runs.Step{}, err
	}
	r, err := runWithSteps(ctx, reads, runID)
	if err != nil {
		return runs.Step{}, err
	}
	if !r.Budget.IsZero() && !r.Status.Terminal() {
		b, err := spentWith(ctx, sc.Graph, r, runs.Step{})
		if err != nil {
			return runs.Step{}, err
		}
		if reason := exhausted(b); reason != "" {
			if _, err := rs.FailRun(ctx, runID, reason); err == nil {
				c.event(ctx, bus.Event{RunID: runID, Type: "run.failed", Data: mustJSON(map[string]any{"error": reason})})
			}
			return runs.Step{}, fmt.Errorf("step %s: %s: %w", key, reason, runs.ErrTerminal)
		}
	}
	if placed {
		// The step's input is the placed version (op place, keyed by the
		// step so a driver's retry gets the same one): the lineage shows
		// where the step ran, and the worker opens that sandbox.
		if input, err = svc.placeInput(ctx, sc, input, place, flow.PlaceKey(runs.KeyedStepID(runID, key))); err != nil {
			return runs.Step{}, fmt.Errorf("step %s: %w", key, err)
		}
	}
	st, created, err := rs.PutStep(ctx, runID, key, target, input, digest)
	if err != nil {
		return runs.Step{}, err
	}
	if !created {
		// Another driver put the key first.
		if err := svc.checkReplayed(ctx, sc, st, digest); err != nil {
			return runs.Step{}, err
		}
	}
	if created {
		if r.Status == runs.RunPending {
			_ = rs.MarkRunning(ctx, runID)
		}
		r.Steps = append(r.Steps, st)
		if err := c.publishCommitted(ctx, sc.Graph, r, st, st.ID); err != nil {
			c.log.WarnContext(ctx, "publish failed; the reconciler will retry", slog.String("step_id", st.ID), slog.Any("error", err))
		}
	}
	return st, nil
}

// checkReplayed compares the digest recorded for an existing step with
// digest, the one a driver re-executing the run puts it with now. A
// different one is a changed workflow: flow.ErrNondeterministic naming the
// step and both digests, unless the run accepts changes, when the recorded
// step stands and the change is recorded as a step.changed event.
func (svc *RunService) checkReplayed(ctx context.Context, sc Scope, st runs.Step, digest string) error {
	nd := flow.CheckDigest(st.Key, st.Digest, digest)
	if nd == nil {
		return nil
	}
	r, err := sc.Runs.Head(ctx, st.RunID)
	if err != nil {
		return err
	}
	if r.ChangesAcceptedAt == nil {
		return nd
	}
	svc.c.event(ctx, bus.Event{RunID: st.RunID, StepID: st.ID, Type: "step.changed", Data: mustJSON(map[string]any{
		"key": st.Key, "recorded_digest": st.Digest, "digest": digest, "accepted_at": r.ChangesAcceptedAt,
	})})
	return nil
}

// AcceptChanges records that the caller accepts that run runID's
// re-executed workflow gives steps other inputs than recorded (they keep
// their recorded results), as a run.changes_accepted event and the run's
// ChangesAcceptedAt. A run that failed because a step's input changed is
// reopened (running again) and, when the coordinator drives it, resumed.
func (svc *RunService) AcceptChanges(ctx context.Context, sc Scope, runID string) (runs.Run, bool, error) {
	c := svc.c
	r, reopened, err := sc.Runs.AcceptChanges(ctx, runID, func(reason string) bool {
		return strings.Contains(reason, flow.ErrNondeterministic.Error())
	})
	if err != nil {
		return runs.Run{}, false, err
	}
	c.event(ctx, bus.Event{RunID: r.ID, Type: "run.changes_accepted", Data: mustJSON(map[string]any{
		"accepted_at": r.ChangesAcceptedAt, "reopened": reopened,
	})})
	if reopened && r.Driver == runs.DriverCoordinator {
		c.driver.kick()
	}
	return r, reopened, nil
}

// republish publishes a pending step's job again (a driver asked for it:
// JetStream's dedupe window drops it when the first is still stored).
func (svc *RunService) republish(ctx context.Context, sc Scope, rs *runs.Store, runID string, st runs.Step) {
	c := svc.c
	r, err := runWithSteps(ctx, rs, runID)
	if err != nil || r.Status.Terminal() {
		return
	}
	if err := c.publishStep(ctx, sc.Graph, r, st, st.ID); err != nil {
		c.log.DebugContext(ctx, "republish", slog.String("step_id", st.ID), slog.Any("error", err))
	}
}

// WaitStep returns the step key of run once it has ended (committed,
// failed, canceled), or as it is when wait passes first.
func (svc *RunService) WaitStep(ctx context.Context, sc Scope, runID, key string, wait time.Duration) (runs.Step, error) {
	c := svc.c
	rs := c.readsFor(sc.Runs)
	id := runs.KeyedStepID(runID, key)
	// Listen before reading: an event that arrives between the read and
	// the wait is not lost.
	wake, done := c.waiters.wait(runID, id)
	defer done()
	st, err := getStepOutcome(ctx, rs, id)
	if err != nil || st.Status.Terminal() || wait <= 0 {
		return st, err
	}
	return svc.awaitStep(ctx, rs, id, st, wake, wait)
}

// PutStepWait is [RunService.PutStep] followed by a wait of up to wait
// for the step's end, in one request (PUT …/steps/{key}?wait=): a driver's
// step costs one round trip instead of two. The waiter listens before the
// step is recorded, so a step that ends at once is not missed.
func (svc *RunService) PutStepWait(ctx context.Context, sc Scope, runID, key string, raw json.RawMessage, input session.ID, wait time.Duration) (runs.Step, error) {
	c := svc.c
	if wait <= 0 {
		return svc.PutStep(ctx, sc, runID, key, raw, input)
	}
	id := runs.KeyedStepID(runID, key)
	wake, done := c.waiters.wait(runID, id)
	defer done()
	st, err := svc.PutStep(ctx, sc, runID, key, raw, input)
	if err != nil || st.Status.Terminal() {
		return st, err
	}
	return svc.awaitStep(ctx, c.readsFor(sc.Runs), id, st, wake, wait)
}

// awaitStep waits up to wait for step id, last read as st, to end: it
// reads the step again when wake fires (an event about the step or its
// run) and, since events may be lost, every poll interval.
func (svc *RunService) awaitStep(ctx context.Context, rs *runs.Store, id string, st runs.Step, wake <-chan struct{}, wait time.Duration) (runs.Step, error) {
	c := svc.c
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	// Events may be lost; poll slowly as well (often without an event
	// feed), and again at the feed's pace after each wake-up: the feed
	// wakes every waiter when its connection drops or comes back.
	pollEvery := func() time.Duration {
		if c.waiters.fed.Load() {
			return 5 * time.Second
		}
		return 200 * time.Millisecond
	}
	every := pollEvery()
	poll := time.NewTicker(every)
	defer poll.Stop()
	for {
		if e := pollEvery(); e != every {
			every = e
			poll.Reset(every)
		}
		select {
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
				return getStepOutcome(context.WithoutCancel(ctx), rs, id)
			}
			return st, ctx.Err()
		case <-wake:
		case <-poll.C:
		}
		// A run that ends cancels its unfinished steps in the same
		// transaction, so the step's own status is enough.
		next, err := getStepOutcome(ctx, rs, id)
		switch {
		case err != nil && ctx.Err() != nil && errors.Is(context.Cause(ctx), context.DeadlineExceeded):
			return st, nil // the wait is over: the step as last read
		case err != nil || next.Status.Terminal():
			return next, err
		}
		st = next
	}
}

// Decide records a decision on a waiting run's pending tool calls (one, or
// every call still pending) and, once none is left, resumes the run. It is
// idempotent per call id: repeating a decision changes nothing; the
// opposite decision on a decided call is a conflict. A run with nothing
// waiting returns an error wrapping runs.ErrNotWaiting.
func (svc *RunService) Decide(ctx context.Context, sc Scope, runID string, req api.ApprovalRequest) (api.ApprovalResponse, error) {
	decision, err := normalizeDecision(req)
	if err != nil {
		return api.ApprovalResponse{}, err
	}
	for range maxDecideRetries {
		res, raced, err := svc.decideOnce(ctx, sc, runID, req, decision)
		if !raced {
			return res, err
		}
	}
	return api.ApprovalResponse{}, fmt.Errorf("%w: run %s: decisions keep racing; retry", session.ErrConflict, runID)
}

// decideOnce makes one attempt; raced reports that another decision was
// appended meanwhile (the caller retries on the new head).
func (svc *RunService) decideOnce(ctx context.Context, sc Scope, runID string, req api.ApprovalRequest, decision string) (api.ApprovalResponse, bool, error) {
	c := svc.c
	rs := sc.Runs
	waiting, err := rs.WaitingSteps(ctx, runID)
	if err != nil {
		return api.ApprovalResponse{}, false, err
	}
	if waiting, err = withoutReviews(ctx, rs, runID, waiting); err != nil {
		return api.ApprovalResponse{}, false, err
	}
	if len(waiting) == 0 {
		r, err := rs.Get(ctx, runID)
		if err != nil {
			return api.ApprovalResponse{}, false, err
		}
		return api.ApprovalResponse{}, false, fmt.Errorf("run %s is %s and no step waits for an approval: %w", runID, r.Status, runs.ErrNotWaiting)
	}
	st := waiting[0]
	if req.CallID != "" {
		// The step that waits on this call, when several do.
		for _, w := range waiting {
			if p, err := svc.pendingOf(ctx, sc, w); err == nil && hasCall(p, req.CallID) {
				st = w
			}
		}
	}
	pending, err := svc.pendingOf(ctx, sc, st)
	if err != nil {
		return api.ApprovalResponse{}, false, err
	}
	head, n, err := svc.approvalHead(ctx, sc, st)
	if err != nil {
		return api.ApprovalResponse{}, false, err
	}
	chunks, err := head.Chunks(ctx)
	if err != nil {
		return api.ApprovalResponse{}, false, err
	}
	_, decided := agent.Pending(chunks)
	if decided == nil {
		decided = map[string]agent.Decision{}
	}

	var targets []agent.PendingCall
	if req.CallID != "" {
		if !hasCall(pending, req.CallID) {
			return api.ApprovalResponse{}, false, badRequest("call_id: %q is not waiting for a decision; waiting: %s", req.CallID, callIDs(pending))
		}
		if d, ok := decided[req.CallID]; ok && d.Decision != decision {
			return api.ApprovalResponse{}, false, fmt.Errorf("%w: call %s is already %s", session.ErrConflict, req.CallID, d.Decision)
		}
		for _, p := range pending {
			if _, ok := decided[p.CallID]; p.CallID == req.CallID && !ok {
				targets = append(targets, p)
			}
		}
	} else {
		for _, p := range pending {
			if _, ok := decided[p.CallID]; !ok {
				targets = append(targets, p)
			}
		}
	}

	by := "api"
	switch p := sc.Principal; {
	case p.Name != "":
		by = p.Name
	case p.TokenID != "":
		by = "token:" + p.TokenID
	}
	var made []api.Decision
	if len(targets) > 0 {
		var cs []session.Chunk
		for _, p := range targets {
			d := agent.Decision{CallID: p.CallID, Tool: p.Tool, Decision: decision, Reason: req.Reason, By: by}
			ch, err := agent.ApprovalChunk(d)
			if err != nil {
				return api.ApprovalResponse{}, false, fmt.Errorf("%w: %w", ErrBadRequest, err)
			}
			cs, made = append(cs, ch), append(made, api.Decision(d))
		}
		next, err := head.Extend(ctx, session.Extension{
			Op: session.OpAppend, Chunks: cs, Key: approvalKey(st.ID, n+1),
			Producer: session.Producer{Run: runID, Step: st.ID},
		})
		if err != nil {
			return api.ApprovalResponse{}, false, fmt.Errorf("record decision: %w", err)
		}
		if !sameChunks(next.Version().Chunks, cs) {
			return api.ApprovalResponse{}, true, nil // another decision took this slot
		}
		head = next
		for _, d := range made {
			decided[d.CallID] = agent.Decision(d)
		}
		for _, d := range made {
			c.event(ctx, bus.Event{RunID: runID, StepID: st.ID, Type: api.EventApprovalDecided, Data: mustJSON(api.ApprovalDecided{
				CallID: d.CallID, Tool: d.Tool, Decision: d.Decision, Reason: d.Reason, By: d.By, Version: head.ID()})})
		}
	}

	res := api.ApprovalResponse{Decided: nonNil(made), Pending: []api.PendingCall{}}
	for _, p := range pending {
		if _, ok := decided[p.CallID]; !ok {
			res.Pending = append(res.Pending, api.PendingCall(p))
		}
	}
	if len(res.Pending) == 0 {
		cont, created, err := rs.Continue(ctx, st.ID, head.ID())
		if err != nil {
			return api.ApprovalResponse{}, false, err
		}
		wire := cont.API()
		res.Continuation = &wire
		if created {
			if err := svc.publishContinuation(ctx, sc, cont); err != nil {
				c.log.WarnContext(ctx, "publish failed; the reconciler will retry", slog.String("step_id", cont.ID), slog.Any("error", err))
			}
		}
	}
	run, err := rs.Get(ctx, runID)
	if err != nil {
		return api.ApprovalResponse{}, false, err
	}
	res.Run = run.API()
	if res.Continuation != nil && len(made) > 0 {
		// Not a run.* event: those end a watcher's stream.
		c.event(ctx, bus.Event{RunID: runID, StepID: st.ID, Type: api.EventStepContinued,
			Data: mustJSON(api.StepContinued{Continuation: res.Continuation.ID, Input: head.ID()})})
	}
	return res, false, nil
}

// publishContinuation reads st's run and publishes the job of st, a
// continuation step just committed, whether or not the caller is still
// there (detached).
func (svc *RunService) publishContinuation(ctx context.Context, sc Scope, st runs.Step) error {
	c := svc.c
	ctx, cancel := detached(ctx)
	defer cancel()
	r, err := sc.Runs.Get(ctx, st.RunID)
	if err != nil {
		return err
	}
	return c.publishStep(ctx, sc.Graph, r, st, st.ID)
}

// pendingOf reads the calls a waiting step waits on from its waiting
// version's approval.pending extra.
func (svc *RunService) pendingOf(ctx context.Context, sc Scope, st runs.Step) ([]agent.PendingCall, error) {
	if st.Output == nil {
		return nil, fmt.Errorf("step %s waits without a waiting version", st.ID)
	}
	v, err := sc.Graph.Get(ctx, *st.Output)
	if err != nil {
		return nil, fmt.Errorf("step %s: waiting version: %w", st.ID, err)
	}
	for _, e := range v.Extras {
		if e.Key == agent.ExtraPending {
			var p []agent.PendingCall
			if err := json.Unmarshal(e.Value, &p); err != nil {
				return nil, fmt.Errorf("step %s: %s: %w", st.ID, agent.ExtraPending, err)
			}
			return p, nil
		}
	}
	return nil, fmt.Errorf("step %s: waiting version %s has no %s", st.ID, v.ID, agent.ExtraPending)
}

// approvalHead returns the newest version of a waiting step's decisions
// (its waiting version when none is recorded) and how many were appended.
func (svc *RunService) approvalHead(ctx context.Context, sc Scope, st runs.Step) (session.Session, int, error) {
	head, err := session.Open(ctx, sc.Graph, *st.Output)
	if err != nil {
		return session.Session{}, 0, err
	}
	n := 0
	for {
		v, err := sc.Graph.GetByKey(ctx, approvalKey(st.ID, n+1))
		if errors.Is(err, session.ErrNotFound) {
			return head, n, nil
		}
		if err != nil {
			return session.Session{}, 0, err
		}
		if head, err = session.Open(ctx, sc.Graph, v.ID); err != nil {
			return session.Session{}, 0, err
		}
		n++
	}
}

// conversationOf returns the root id of the session id belongs to (its
// farthest lineage ancestor, id itself for a root): the run's
// gen_ai.conversation.id. A graph that cannot answer gives id.
func conversationOf(ctx context.Context, g store.Store, id session.ID) session.ID {
	anc, err := g.Ancestors(ctx, id, 0)
	if err != nil {
		return id
	}
	root, depth := id, 0
	for _, a := range anc {
		if a.Depth > depth {
			root, depth = a.ID, a.Depth
		}
	}
	return root
}
