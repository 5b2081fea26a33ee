package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/service"
	"github.com/rath-run/rath/internal/telemetry"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/flowfile"
	"github.com/rath-run/rath/pkg/session"
)

// The coordinator drives declarative workflow runs (driver "coordinator"):
// the holder of the "workflows" lease executes each unfinished run's
// workflow file with flow.Run on a runtime that records and publishes steps
// through the run store and bus directly (no HTTP), and ends the run with
// the workflow's output or error. A coordinator that restarts (or a replica
// that takes the lease over) re-executes the file from the top: the steps
// that already committed come back from the run store without running
// again, so the run continues where it was.
//
// The same leader ends runs whose deadline passed (timed_out).

// MaxDrivers bounds the workflow runs one coordinator drives at once; runs
// beyond it wait for a slot.
const MaxDrivers = 64

// stepWait is how long one wait for a step's end lasts before it is
// renewed.
const stepWait = 30 * time.Second

// WorkflowDriver is the service that drives declarative workflow runs and
// ends runs past their deadline, while this replica holds the "workflows"
// lease (see above). Submit kicks it when a workflow run is recorded.
//
// Stop hands the runs it drives back: each driver's context is canceled
// (its step waits and flow.Run return; the steps already put stay
// recorded, and their jobs run on the workers), Stop waits for every
// driver to return, and the lease is released, so that another replica (or
// this one, restarted) resumes the runs from their committed steps at
// once.
type WorkflowDriver struct {
	service.Base
	c *Coordinator
	// kickCh asks the loop to look for runs to drive now.
	kickCh chan struct{}

	mu      sync.Mutex
	driving map[string]context.CancelFunc // by run id
}

func newWorkflowDriver(c *Coordinator) *WorkflowDriver {
	return &WorkflowDriver{c: c, kickCh: make(chan struct{}, 1), driving: map[string]context.CancelFunc{}}
}

// kick asks the workflow loop to look for runs to drive now; it never
// blocks, and a kick of a stopped driver waits for its next start.
func (d *WorkflowDriver) kick() {
	select {
	case d.kickCh <- struct{}{}:
	default:
	}
}

// Start implements [service.Service].
func (d *WorkflowDriver) Start(ctx context.Context) error {
	return d.Go(ctx, d.run)
}

// run runs the workflow loop until ctx ends, then stops every driver,
// waits for them and releases the lease.
func (d *WorkflowDriver) run(ctx context.Context) {
	c := d.c
	defer releaseLease(ctx, c, "workflows")
	var wg sync.WaitGroup
	defer wg.Wait()
	defer d.stopAll()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		leader, err := c.runs.AcquireLease(ctx, "workflows", c.cfg.Name, c.cfg.LeaseTTL)
		if err != nil && ctx.Err() == nil {
			c.log.WarnContext(ctx, "workflows lease", slog.Any("error", err))
		}
		if leader {
			d.expire(ctx)
			d.resume(ctx, &wg)
		} else {
			d.stopAll()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-d.kickCh:
		}
	}
}

// stopAll cancels every driver (they return soon after).
func (d *WorkflowDriver) stopAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, cancel := range d.driving {
		cancel()
	}
}

// expire ends the runs whose deadline passed.
func (d *WorkflowDriver) expire(ctx context.Context) {
	c := d.c
	ended, err := c.runs.Expire(ctx, time.Now(), 100)
	if err != nil && ctx.Err() == nil {
		c.log.WarnContext(ctx, "expire runs", slog.Any("error", err))
	}
	for _, r := range ended {
		c.event(ctx, runEndEvent(r))
	}
}

// resume starts a driver for every unfinished coordinator-driven run that
// has none, up to MaxDrivers at once.
func (d *WorkflowDriver) resume(ctx context.Context, wg *sync.WaitGroup) {
	c := d.c
	list, err := c.runs.Driven(ctx, runs.DriverCoordinator, 1000)
	if err != nil {
		if ctx.Err() == nil {
			c.log.WarnContext(ctx, "workflow runs", slog.Any("error", err))
		}
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range list {
		if _, ok := d.driving[r.ID]; ok {
			continue
		}
		if len(d.driving) >= MaxDrivers {
			return
		}
		dctx, cancel := context.WithCancel(ctx)
		d.driving[r.ID] = cancel
		wg.Go(func() {
			defer func() {
				cancel()
				d.mu.Lock()
				delete(d.driving, r.ID)
				d.mu.Unlock()
			}()
			c.drive(dctx, r)
		})
	}
}

// drive executes one workflow run to its end (or until ctx ends: the run
// is then resumed later, by this coordinator or another).
func (c *Coordinator) drive(ctx context.Context, r runs.Run) {
	log := c.log.With(slog.String("run_id", r.ID))
	end := func(run runs.Run, err error) {
		if err != nil {
			if !errors.Is(err, runs.ErrTerminal) {
				log.WarnContext(ctx, "end workflow run", slog.Any("error", err))
			}
			return
		}
		c.event(ctx, runEndEvent(run))
	}
	f, err := flowfile.Parse("workflow", []byte(r.Workflow), nil)
	if err != nil {
		end(c.runs.FailRun(ctx, r.ID, "workflow: "+err.Error()))
		return
	}
	wf, err := f.Build()
	if err != nil {
		end(c.runs.FailRun(ctx, r.ID, "workflow: "+err.Error()))
		return
	}
	in, err := session.Open(ctx, c.driverGraph(c.graph, r.ID), r.Input)
	if err != nil {
		if ctx.Err() == nil {
			log.WarnContext(ctx, "open workflow input", slog.Any("error", err))
		}
		return
	}
	if err := c.runs.MarkRunning(ctx, r.ID); err != nil {
		log.WarnContext(ctx, "start workflow run", slog.Any("error", err))
		return
	}
	log.InfoContext(ctx, "driving workflow run")
	// This drive (the first, or a resume after a restart or a lease
	// takeover) is a span of the run's trace: the steps it puts and the
	// versions it merges and forks hang below the run span.
	rctx := telemetry.RunContext(ctx, r.TraceContext)
	fctx, span := telemetry.Tracer(c.cfg.TracerProvider).Start(rctx, "drive workflow",
		trace.WithAttributes(telemetry.AttrRunID.String(r.ID), telemetry.AttrGenAIConversation.String(r.Conversation)),
		telemetry.CallerLink(ctx, rctx))
	out, err := flow.Run(fctx, &localRuntime{c: c, run: r.ID}, wf, in)
	endSpan(span, err)
	if ctx.Err() != nil {
		return // shutting down or no longer the leader: resumed later
	}
	if cur, gerr := c.runs.Get(ctx, r.ID); gerr == nil && cur.Status.Terminal() {
		return // canceled, timed out or failed meanwhile
	}
	if err != nil {
		end(c.runs.FailRun(ctx, r.ID, err.Error()))
		return
	}
	end(c.runs.Complete(ctx, r.ID, out.ID()))
}

// ErrStepCanceled reports a step canceled with its run (canceled, timed
// out, failed).
var ErrStepCanceled = errors.New("rath: step canceled")

// localRuntime is the cluster runtime inside the coordinator: each step is
// recorded and published through the run store and bus, and its end is
// awaited through the step waiters.
type localRuntime struct {
	c   *Coordinator
	run string
}

// Step implements flow.Runtime.
func (rt *localRuntime) Step(ctx context.Context, key string, call flow.Call, in session.Session) (session.Session, error) {
	raw, err := json.Marshal(call)
	if err != nil {
		return session.Session{}, fmt.Errorf("step %s: %w", key, err)
	}
	st, err := rt.c.runSvc.PutStepWait(ctx, rt.c.SystemScope(), rt.run, key, raw, in.ID(), stepWait)
	if err != nil {
		return session.Session{}, err
	}
	for !st.Status.Terminal() {
		if st, err = rt.c.runSvc.WaitStep(ctx, rt.c.SystemScope(), rt.run, key, stepWait); err != nil {
			return session.Session{}, err
		}
	}
	return stepOutput(ctx, in.Graph(), st)
}

// stepOutput is an ended step's output session, or its error.
func stepOutput(ctx context.Context, g session.Graph, st runs.Step) (session.Session, error) {
	switch {
	case st.Status == runs.StepCommitted && st.Output != nil:
		return session.Open(ctx, g, *st.Output)
	case st.Status == runs.StepFailed:
		return session.Session{}, fmt.Errorf("step %s failed: %s", st.Key, st.Error)
	default:
		return session.Session{}, fmt.Errorf("step %s is %s: %w", st.Key, st.Status, ErrStepCanceled)
	}
}
