package worker_test

import (
	"context"
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
	rec := &ackRecorder{Bus: r.bus, acked: map[string][]string{}, quiet: map[string][]string{}}
	r.startWorkerWith(t, r.runs, rec, worker.Config{Name: "acks", Slots: 2})
	quick := agent.Spec{Name: "quick", Model: "scripted", Script: []llm.ScriptReply{{Content: "hi"}}}

	one, _ := r.submitAgent(t, quick, 1)
	if got := r.waitRun(t, one.ID); got.Status != runs.RunSucceeded {
		t.Fatalf("run = %s, want succeeded", got.Status)
	}
	// The model's stream (step.token, step.reply) comes between started
	// and committed.
	seen := slices.DeleteFunc(r.runEventTypes(t, one.ID), func(typ string) bool { return typ == "step.token" || typ == "step.reply" })
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
	two, _ := r.submitAgent(t, quick, 2)
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

// A step's job is settled with an ack that asks for no reply: the step's
// outcome is in the store, so a lost ack costs a redelivery that finds it,
// and waiting for the server's confirmation cost a message and a round
// trip on every step.
func TestStepsAckWithoutWaitingForTheServer(t *testing.T) {
	r := newRig(t)
	acks, err := r.nc.SubscribeSync("$JS.ACK.>")
	if err != nil {
		t.Fatal(err)
	}
	r.startWorkerWith(t, r.runs, r.bus, worker.Config{Name: "nowait", Slots: 1})
	quick := agent.Spec{Name: "quick", Model: "scripted", Script: []llm.ScriptReply{{Content: "hi"}}}
	run, _ := r.submitAgent(t, quick, 1)
	if got := r.waitRun(t, run.ID); got.Status != runs.RunSucceeded {
		t.Fatalf("run = %s, want succeeded", got.Status)
	}
	m, err := acks.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("the step's ack was not seen: %v", err)
	}
	if string(m.Data) != "+ACK" || m.Reply != "" {
		t.Errorf("the step's ack: %q with reply subject %q, want +ACK asking for no reply", m.Data, m.Reply)
	}
	// The job left the work queue: nothing is redelivered.
	testenv.Eventually(t, 10*time.Second, "the job acknowledged", func() bool {
		q, _, err := r.bus.QueuedSteps(context.Background(), bus.DefaultQueue, 10)
		return err == nil && len(q) == 0
	})
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
	steps := &crossedTouch{Store: r.runs}
	r.startWorkerWith(t, steps, r.bus, worker.Config{Name: "crossed", Slots: 1, Heartbeat: 20 * time.Millisecond})
	run, _ := r.submitAgent(t, agent.Spec{Name: "slowish", Model: "scripted", Script: []llm.ScriptReply{{Content: "hi", DelayMS: 300}}}, 1)
	seen := r.runEventTypes(t, run.ID)
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
