package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rath-run/rath/internal/runs"
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

// workflowState is the coordinator's workflow machinery; its zero value is
// ready.
type workflowState struct {
	waiters stepWaiters
	// fed: the event feed is live, so waiters may poll slowly.
	fed atomic.Bool

	once   sync.Once
	kickCh chan struct{}

	mu      sync.Mutex
	driving map[string]context.CancelFunc
}

func (w *workflowState) kicker() chan struct{} {
	w.once.Do(func() { w.kickCh = make(chan struct{}, 1) })
	return w.kickCh
}

// kick asks the workflow loop to look for runs to drive now.
func (w *workflowState) kick() {
	select {
	case w.kicker() <- struct{}{}:
	default:
	}
}

// runWorkflows runs the workflow loop until ctx ends, then stops every
// driver and waits for them. RunReconciler runs it.
func (c *Coordinator) runWorkflows(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.feedEvents(ctx)
	}()
	stopAll := func() {
		c.wf.mu.Lock()
		for _, cancel := range c.wf.driving {
			cancel()
		}
		c.wf.mu.Unlock()
	}
	defer stopAll()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		leader, err := c.runs.AcquireLease(ctx, "workflows", c.cfg.Name, c.cfg.LeaseTTL)
		if err != nil && ctx.Err() == nil {
			c.log.WarnContext(ctx, "workflows lease", slog.Any("error", err))
		}
		if leader {
			c.expire(ctx)
			c.resume(ctx, &wg)
		} else {
			stopAll()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.wf.kicker():
		}
	}
}

// expire ends the runs whose deadline passed.
func (c *Coordinator) expire(ctx context.Context) {
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
func (c *Coordinator) resume(ctx context.Context, wg *sync.WaitGroup) {
	list, err := c.runs.Driven(ctx, runs.DriverCoordinator, 1000)
	if err != nil {
		if ctx.Err() == nil {
			c.log.WarnContext(ctx, "workflow runs", slog.Any("error", err))
		}
		return
	}
	c.wf.mu.Lock()
	defer c.wf.mu.Unlock()
	if c.wf.driving == nil {
		c.wf.driving = map[string]context.CancelFunc{}
	}
	for _, r := range list {
		if _, ok := c.wf.driving[r.ID]; ok {
			continue
		}
		if len(c.wf.driving) >= MaxDrivers {
			return
		}
		dctx, cancel := context.WithCancel(ctx)
		c.wf.driving[r.ID] = cancel
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				cancel()
				c.wf.mu.Lock()
				delete(c.wf.driving, r.ID)
				c.wf.mu.Unlock()
			}()
			c.drive(dctx, r)
		}()
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
	in, err := session.Open(ctx, c.graph, r.Input)
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
	out, err := flow.Run(ctx, &localRuntime{c: c, run: r.ID}, wf, in)
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
	st, err := rt.c.PutStepWait(ctx, rt.c.runs, rt.run, key, raw, in.ID(), stepWait)
	if err != nil {
		return session.Session{}, err
	}
	for !st.Status.Terminal() {
		if st, err = rt.c.WaitStep(ctx, rt.c.runs, rt.run, key, stepWait); err != nil {
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
