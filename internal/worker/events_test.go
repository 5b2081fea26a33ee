package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/internal/worker"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
)

// ackRecorder is the bus as a worker's Events, noting which events asked
// for the server's acknowledgement.
type ackRecorder struct {
	*bus.Bus
	mu    sync.Mutex
	acked map[string][]string // run → types published with PublishEvent
	quiet map[string][]string // run → types published with PublishProgress
}

func (a *ackRecorder) PublishEvent(ctx context.Context, e bus.Event) error {
	a.mu.Lock()
	a.acked[e.RunID] = append(a.acked[e.RunID], e.Type)
	a.mu.Unlock()
	return a.Bus.PublishEvent(ctx, e)
}

func (a *ackRecorder) PublishProgress(ctx context.Context, e bus.Event) error {
	a.mu.Lock()
	a.quiet[e.RunID] = append(a.quiet[e.RunID], e.Type)
	a.mu.Unlock()
	return a.Bus.PublishProgress(ctx, e)
}

// A step whose commit ends its run asks for one acknowledgement, the run
// end's: its step.committed goes before it unacknowledged (one message
// less a step), and a watcher still reads started, committed, completed
// in order. A step whose run goes on has its commit acknowledged.
func TestOneStepRunAsksOneAcknowledgement(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	rec := &ackRecorder{Bus: r.bus, acked: map[string][]string{}, quiet: map[string][]string{}}
	cons, err := r.bus.Consumer(ctx, bus.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(r.graph, r.runs, cons, rec, func(spec agent.Spec) (llm.Provider, string, error) {
		return &llm.Scripted{Replies: spec.Script}, "scripted", nil
	}, worker.Config{Name: "acks", Slots: 2, MaxDeliver: r.bus.Config().MaxDeliver, FetchWait: 200 * time.Millisecond, ShutdownTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(wctx) }()
	t.Cleanup(func() { cancel(); <-done })

	submit := func(steps int) runs.Run {
		t.Helper()
		in, err := session.FromUserMessage(ctx, r.graph, "hello")
		if err != nil {
			t.Fatal(err)
		}
		target, err := json.Marshal(agent.Spec{Name: "quick", Model: "scripted", Script: []llm.ScriptReply{{Content: "hi"}}})
		if err != nil {
			t.Fatal(err)
		}
		run := runs.Run{ID: runs.NewRunID(), Queue: bus.DefaultQueue, Target: target, Input: in.ID()}
		ss := make([]runs.Step, steps)
		for i := range ss {
			ss[i] = runs.Step{Ordinal: i, Input: in.ID()}
		}
		if err := r.runs.Create(ctx, &run, ss); err != nil {
			t.Fatal(err)
		}
		st := run.Steps[0]
		if _, err := r.bus.Publish(ctx, bus.Job{StepID: st.ID, RunID: run.ID, Queue: run.Queue, Input: in.ID().String(), Target: target}, nil); err != nil {
			t.Fatal(err)
		}
		return run
	}

	one := submit(1)
	if got := r.waitRun(t, one.ID); got.Status != runs.RunSucceeded {
		t.Fatalf("run = %s, want succeeded", got.Status)
	}
	wctx2, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	events, _, err := r.bus.WatchRun(wctx2, one.ID)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for e := range events {
		if e.Type == "step.token" || e.Type == "step.reply" {
			continue // the model's stream, between started and committed
		}
		seen = append(seen, e.Type)
		if e.Type == "run.completed" {
			break
		}
	}
	stop()
	for range events {
	}
	if !slices.Equal(seen, []string{"step.started", "step.committed", "run.completed"}) {
		t.Errorf("the run's stream: %v, want step.started, step.committed, run.completed", seen)
	}
	rec.mu.Lock()
	acked, quiet := slices.Clone(rec.acked[one.ID]), slices.Clone(rec.quiet[one.ID])
	rec.mu.Unlock()
	if !slices.Equal(acked, []string{"run.completed"}) || !slices.Contains(quiet, "step.committed") {
		t.Errorf("a one-step run: acknowledged %v, unacknowledged %v; want only run.completed acknowledged", acked, quiet)
	}

	// Two steps, the second never published: the first's commit leaves the
	// run going, and its event is acknowledged.
	two := submit(2)
	testenv.Eventually(t, 30*time.Second, "the first step's commit event", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return slices.Contains(rec.acked[two.ID], "step.committed") || slices.Contains(rec.quiet[two.ID], "step.committed")
	})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if slices.Contains(rec.quiet[two.ID], "step.committed") || slices.Contains(rec.acked[two.ID], "run.completed") {
		t.Errorf("a commit that leaves its run going: acknowledged %v, unacknowledged %v; want step.committed acknowledged", rec.acked[two.ID], rec.quiet[two.ID])
	}
}

// crossedTouch is the run store whose Touch answers as it does when the
// touch crossed the step's own commit: the step is committed.
type crossedTouch struct {
	*runs.Store
	touches atomic.Int64
}

func (c *crossedTouch) Touch(_ context.Context, stepID string) error {
	c.touches.Add(1)
	return fmt.Errorf("step %s is committed: %w (%w)", stepID, runs.ErrCommitted, runs.ErrTerminal)
}

// A heartbeat that finds the step committed (its own commit, applied by
// the database, crossed the touch) does not abort the step: the step
// finishes, the run succeeds and its events go out. Aborting it canceled
// the commit's context after the database had applied it, and the step's
// step.committed and the run's end were never published: a watcher of the
// run waited for them forever (TestBenchAgainstACluster, under load, with
// 300 ms heartbeats).
func TestTouchThatFindsTheStepCommittedDoesNotAbortIt(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	steps := &crossedTouch{Store: r.runs}
	cons, err := r.bus.Consumer(ctx, bus.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(r.graph, steps, cons, r.bus, func(spec agent.Spec) (llm.Provider, string, error) {
		return &llm.Scripted{Replies: spec.Script}, "scripted", nil
	}, worker.Config{Name: "crossed", Slots: 1, MaxDeliver: r.bus.Config().MaxDeliver, FetchWait: 200 * time.Millisecond,
		Heartbeat: 20 * time.Millisecond, ShutdownTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(wctx) }()
	t.Cleanup(func() { cancel(); <-done })

	in, err := session.FromUserMessage(ctx, r.graph, "hello")
	if err != nil {
		t.Fatal(err)
	}
	target, err := json.Marshal(agent.Spec{Name: "slowish", Model: "scripted", Script: []llm.ScriptReply{{Content: "hi", DelayMS: 300}}})
	if err != nil {
		t.Fatal(err)
	}
	run := runs.Run{ID: runs.NewRunID(), Queue: bus.DefaultQueue, Target: target, Input: in.ID()}
	if err := r.runs.Create(ctx, &run, []runs.Step{{Input: in.ID()}}); err != nil {
		t.Fatal(err)
	}
	watch, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	events, _, err := r.bus.WatchRun(watch, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.bus.Publish(ctx, bus.Job{StepID: run.Steps[0].ID, RunID: run.ID, Queue: run.Queue, Input: in.ID().String(), Target: target}, nil); err != nil {
		t.Fatal(err)
	}
	var seen []string
	for e := range events {
		seen = append(seen, e.Type)
		if e.Type == "run.completed" {
			break
		}
	}
	stop()
	for range events {
	}
	if !slices.Contains(seen, "step.committed") || !slices.Contains(seen, "run.completed") {
		t.Fatalf("the run's events: %v, want step.committed and run.completed", seen)
	}
	if got := r.waitRun(t, run.ID); got.Status != runs.RunSucceeded {
		t.Fatalf("run = %s, want succeeded", got.Status)
	}
	if steps.touches.Load() == 0 {
		t.Fatal("no heartbeat touched the step: the test did not cross a touch with the step")
	}
}
