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

// callRecorder is the bus as a worker's Events, noting each call: the
// types it published, and whether it asked for the server's
// acknowledgement.
type callRecorder struct {
	*bus.Bus
	mu    sync.Mutex
	calls map[string][]eventCall // run → its calls, in order
}

type eventCall struct {
	acked bool
	types []string
}

func (c *callRecorder) note(acked bool, es []bus.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	call := eventCall{acked: acked}
	for _, e := range es {
		call.types = append(call.types, e.Type)
	}
	c.calls[es[0].RunID] = append(c.calls[es[0].RunID], call)
}

func (c *callRecorder) PublishEvents(ctx context.Context, es []bus.Event) error {
	c.note(true, es)
	return c.Bus.PublishEvents(ctx, es)
}

func (c *callRecorder) PublishProgressEvents(ctx context.Context, es []bus.Event) error {
	c.note(false, es)
	return c.Bus.PublishProgressEvents(ctx, es)
}

func (c *callRecorder) callsOf(run string) []eventCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls[run])
}

// storedMessages reads run's events from the events stream as stored:
// each event's type, and the stream sequences of the messages they came
// in.
func (r *rig) storedMessages(t *testing.T, run string) (types []string, seqs []uint64) {
	t.Helper()
	_, err := r.bus.ReplayRun(context.Background(), run, 0, func(e bus.StoredEvent) error {
		types = append(types, e.Type)
		if len(seqs) == 0 || seqs[len(seqs)-1] != e.Seq {
			seqs = append(seqs, e.Seq)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return types, seqs
}

// A step that ends within the linger sends its events and its end as one
// message, acknowledged: started, the model's stream, committed, and the
// run's end when the commit ends the run. The stream stores one message
// where there were four, and a watcher reads the events as before.
func TestFastStepSendsItsEventsAsOneMessage(t *testing.T) {
	r := newRig(t)
	rec := &callRecorder{Bus: r.bus, calls: map[string][]eventCall{}}
	// A linger no step here outlasts: what is measured is the batching,
	// not the machine's speed.
	r.startWorkerWith(t, r.runs, rec, worker.Config{Name: "batch", Slots: 2, EventLinger: time.Hour})
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
	calls := rec.callsOf(one.ID)
	if len(calls) != 1 || !calls[0].acked || calls[0].types[0] != "step.started" ||
		!slices.Equal(calls[0].types[len(calls[0].types)-2:], []string{"step.committed", "run.completed"}) {
		t.Errorf("a one-step run published %+v; want one acknowledged call: step.started … step.committed, run.completed", calls)
	}
	types, seqs := r.storedMessages(t, one.ID)
	if len(seqs) != 1 || len(types) != len(calls[0].types) {
		t.Errorf("the stream holds the run's %d events %v in messages %v, want all in one", len(types), types, seqs)
	}

	// Two steps, the second never published: the first's commit leaves the
	// run going, and its message ends with the commit.
	two, _ := r.submitAgent(t, quick, 2)
	testenv.Eventually(t, 30*time.Second, "the first step's events", func() bool { return len(rec.callsOf(two.ID)) > 0 })
	calls = rec.callsOf(two.ID)
	if last := calls[len(calls)-1]; len(calls) != 1 || !last.acked || last.types[len(last.types)-1] != "step.committed" {
		t.Errorf("a commit that leaves its run going: published %+v, want one acknowledged call ending with step.committed", calls)
	}
}

// gatedModel answers once its gate is closed.
type gatedModel struct{ gate chan struct{} }

func (g gatedModel) Chat(ctx context.Context, _ llm.Request) (llm.Response, error) {
	select {
	case <-g.gate:
		return llm.Response{Content: "done"}, nil
	case <-ctx.Done():
		return llm.Response{}, ctx.Err()
	}
}

// A step still running when its linger passes sends what it holds then
// (its start), unacknowledged, while it runs: a watcher of a slow step
// sees it start. Its end goes out after, acknowledged, with the run's.
func TestSlowStepSendsItsStartAtTheLinger(t *testing.T) {
	r := newRig(t)
	rec := &callRecorder{Bus: r.bus, calls: map[string][]eventCall{}}
	gate := make(chan struct{})
	cons, err := r.bus.Consumer(context.Background(), bus.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	resolve := func(agent.Spec) (llm.Provider, string, error) { return gatedModel{gate}, "gated", nil }
	w, err := worker.New(r.graph, r.runs, cons, rec, resolve, worker.Config{Name: "linger", Slots: 1, EventLinger: time.Millisecond,
		MaxDeliver: r.bus.Config().MaxDeliver, FetchWait: 200 * time.Millisecond, ShutdownTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)

	run, _ := r.submitAgent(t, agent.Spec{Name: "slow", Model: "gated"}, 1)
	// The model has not answered: only the linger can have sent the start.
	testenv.Eventually(t, 30*time.Second, "step.started while the step runs", func() bool {
		types, _ := r.storedMessages(t, run.ID)
		return slices.Contains(types, "step.started")
	})
	close(gate)
	if got := r.waitRun(t, run.ID); got.Status != runs.RunSucceeded {
		t.Fatalf("run = %s, want succeeded", got.Status)
	}
	calls := rec.callsOf(run.ID)
	if len(calls) < 2 || calls[0].acked || !slices.Equal(calls[0].types, []string{"step.started"}) {
		t.Errorf("the slow step's first call: %+v, want step.started alone, unacknowledged", calls)
	}
	if last := calls[len(calls)-1]; !last.acked || !slices.Equal(last.types, []string{"step.committed", "run.completed"}) {
		t.Errorf("the slow step's last call: %+v, want step.committed and run.completed, acknowledged", last)
	}
	types, seqs := r.storedMessages(t, run.ID)
	if types[0] != "step.started" || types[len(types)-1] != "run.completed" || len(seqs) != len(calls) {
		t.Errorf("stored: %v in %d messages, want step.started first, run.completed last, a message a call (%d)", types, len(seqs), len(calls))
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
