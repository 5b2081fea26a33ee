package worker_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
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
