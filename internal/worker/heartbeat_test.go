package worker_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/bus/bustest"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/internal/worker"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/store/storeurl"
)

// The step sleeps for stepDelay in the scripted model, well past the bus's
// AckWait, so only heartbeats keep JetStream from redelivering it.
const (
	ackWait   = time.Second
	stepDelay = 2500 * time.Millisecond
)

type rig struct {
	bus   *bus.Bus
	nc    *nats.Conn // the bus's connection
	graph store.Store
	runs  *runs.Store
}

func newRig(t *testing.T) *rig {
	t.Helper()
	b, _, nc := bustest.NewWith(t, bustest.Options{Config: bus.Config{AckWait: ackWait}})
	st, rs := openStores(t)
	return &rig{bus: b, nc: nc, graph: st, runs: rs}
}

// submit records a one-step run of a slow scripted agent and publishes its
// job, as the coordinator does.
func (r *rig) submit(t *testing.T) (runs.Run, session.Session) {
	t.Helper()
	spec := agent.Spec{Name: "slow", Model: "scripted", Script: []llm.ScriptReply{{Content: "done", DelayMS: int(stepDelay / time.Millisecond)}}}
	return r.submitAgent(t, spec, 1)
}

// submitAgent records a run of spec with steps steps on a new session and
// publishes its first step's job, as the coordinator does.
func (r *rig) submitAgent(t *testing.T, spec agent.Spec, steps int) (runs.Run, session.Session) {
	t.Helper()
	ctx := context.Background()
	in, err := session.FromUserMessage(ctx, r.graph, "take your time")
	if err != nil {
		t.Fatal(err)
	}
	target, err := json.Marshal(spec)
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
	return run, in
}

// startWorker runs a two-slot worker (so a redelivery could run beside the
// first delivery) until the test ends.
func (r *rig) startWorker(t *testing.T, cfg worker.Config) {
	t.Helper()
	cfg.Name, cfg.Slots = "hb-worker", 2
	r.startWorkerWith(t, r.runs, r.bus, cfg)
}

// startWorkerWith runs a worker of the scripted model on the rig's graph,
// with steps and events (the rig's run store and bus, or wrappers of
// them), until the test ends. cfg's MaxDeliver, FetchWait and
// ShutdownTimeout are set.
func (r *rig) startWorkerWith(t *testing.T, steps worker.Steps, events worker.Events, cfg worker.Config) {
	t.Helper()
	r.startWorkerOn(t, r.graph, steps, events, cfg)
}

// startWorkerOn is startWorkerWith on graph instead of the rig's.
func (r *rig) startWorkerOn(t *testing.T, graph store.Store, steps worker.Steps, events worker.Events, cfg worker.Config) {
	t.Helper()
	cons, err := r.bus.Consumer(context.Background(), bus.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxDeliver = r.bus.Config().MaxDeliver
	cfg.FetchWait, cfg.ShutdownTimeout = 200*time.Millisecond, 10*time.Second
	w, err := worker.New(graph, steps, cons, events, scriptedResolve, cfg)
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
}

// scriptedResolve runs every agent on the scripted model of its spec.
func scriptedResolve(spec agent.Spec) (llm.Provider, string, error) {
	return &llm.Scripted{Replies: spec.Script}, "scripted", nil
}

// runEventTypes reads the types of run's events from its stream, from the
// first to its run.completed.
func (r *rig) runEventTypes(t *testing.T, run string) []string {
	t.Helper()
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	events, _, err := r.bus.WatchRun(ctx, run)
	if err != nil {
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
	return seen
}

// runWorker runs w until the test ends.
func runWorker(t *testing.T, w *worker.Worker) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func (r *rig) waitRun(t *testing.T, id string) runs.Run {
	t.Helper()
	var run runs.Run
	testenv.Eventually(t, 30*time.Second, "run "+id+" to end", func() bool {
		var err error
		if run, err = r.runs.Get(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		return run.Status.Terminal()
	})
	return run
}

// checkOneCommit asserts the step's input has exactly one child: the step
// committed once however often it ran.
func (r *rig) checkOneCommit(t *testing.T, run runs.Run, in session.Session) {
	t.Helper()
	children, err := r.graph.Children(context.Background(), in.ID())
	if err != nil {
		t.Fatal(err)
	}
	if len(children) != 1 || run.Output == nil || children[0].ID != *run.Output {
		t.Fatalf("input has children %+v, want exactly the run's output %v", children, run.Output)
	}
}

// TestHeartbeatsPreventRedelivery runs a step 2.5× longer than the ack wait
// with heartbeats on: JetStream must not redeliver it, so the step starts
// exactly once.
func TestHeartbeatsPreventRedelivery(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	run, in := r.submit(t)
	r.startWorker(t, worker.Config{Heartbeat: ackWait / 5})
	run = r.waitRun(t, run.ID)
	if run.Status != runs.RunSucceeded {
		t.Fatalf("run %s: %s", run.Status, run.Error)
	}
	if got := run.Steps[0].Attempts; got != 1 {
		t.Fatalf("step started %d times, want 1: heartbeats did not hold the delivery", got)
	}
	r.checkOneCommit(t, run, in)
}

// TestNoHeartbeatsRedeliver is the negative control: the same step without
// heartbeats outlives its ack deadline and JetStream redelivers it while it
// runs. The commit stays single because it is keyed by the step id.
func TestNoHeartbeatsRedeliver(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	run, in := r.submit(t)
	r.startWorker(t, worker.Config{Heartbeat: ackWait / 5, NoHeartbeat: true})
	run = r.waitRun(t, run.ID)
	if run.Status != runs.RunSucceeded {
		t.Fatalf("run %s: %s", run.Status, run.Error)
	}
	if got := run.Steps[0].Attempts; got < 2 {
		t.Fatalf("step started %d times, want a redelivery (>= 2) without heartbeats", got)
	}
	r.checkOneCommit(t, run, in)
}

// openStores opens a migrated embedded store and its run store in a
// temporary directory, closed when t ends: the worker rigs' database.
func openStores(t *testing.T) (store.Store, *runs.Store) {
	t.Helper()
	return openStoresAt(context.Background(), t, "sqlite:"+filepath.Join(t.TempDir(), "rath.db"))
}

// openStoresAt opens (migrating it) the graph and run stores at url, under
// ctx (a context carrying a query tracer installs it on their Postgres
// connections), closed when the test ends.
func openStoresAt(ctx context.Context, t *testing.T, url string) (store.Store, *runs.Store) {
	t.Helper()
	st, err := storeurl.Open(ctx, url, storeurl.Options{Migrate: true, Create: true})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	rs, db, err := runs.Open(ctx, url)
	if err != nil {
		t.Fatalf("open run store: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return st, rs
}
