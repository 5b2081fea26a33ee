package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/coordinator"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/internal/worker"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/session"
)

const scriptedSpec = `{"name":"echo","model":"scripted","script":[{"content":"hello from the scripted model"}]}`

type stack struct {
	dev *app.Dev
	cl  *client.Client
}

func startDev(t *testing.T, storeURL string, cfg app.DevConfig) *stack {
	t.Helper()
	cfg.Dir = t.TempDir()
	cfg.Addr = "127.0.0.1:0"
	cfg.StoreURL = storeURL
	if cfg.StoreURL == "" {
		cfg.StoreURL = "sqlite:" + filepath.Join(cfg.Dir, "rath.db")
	}
	d, err := app.StartDev(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start dev stack: %v", err)
	}
	t.Cleanup(d.Close)
	cl, err := client.New(d.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	return &stack{dev: d, cl: cl}
}

func (s *stack) waitRun(t *testing.T, id string) runs.Run {
	t.Helper()
	var r runs.Run
	testenv.Eventually(t, 30*time.Second, "run "+id+" to end", func() bool {
		r = runs.Run{}
		if err := s.cl.Do(context.Background(), "GET", "/v1/runs/"+id, nil, &r); err != nil {
			t.Fatalf("get run: %v", err)
		}
		return r.Status.Terminal()
	})
	return r
}

func (s *stack) submit(t *testing.T, spec, message string) runs.Run {
	t.Helper()
	var r runs.Run
	if err := s.cl.Do(context.Background(), "POST", "/v1/runs", map[string]any{"agent": json.RawMessage(spec), "message": message}, &r); err != nil {
		t.Fatalf("submit: %v", err)
	}
	return r
}

func checkScriptedRun(t *testing.T, s *stack) {
	t.Helper()
	ctx := context.Background()
	r := s.submit(t, scriptedSpec, "hi")
	var events []string
	if err := s.cl.Watch(ctx, r.ID, func(e api.Event) error { events = append(events, e.Type); return nil }); err != nil {
		t.Fatalf("watch: %v", err)
	}
	r = s.waitRun(t, r.ID)
	if r.Status != runs.RunSucceeded || r.Output == nil {
		t.Fatalf("run ended %s (%s), output %v", r.Status, r.Error, r.Output)
	}
	if len(r.Steps) != 1 || r.Steps[0].Status != runs.StepCommitted || r.Steps[0].Attempts != 1 {
		t.Fatalf("steps = %+v, want one committed on the first attempt", r.Steps)
	}
	out, err := session.Open(ctx, s.dev.Backend.Store, *r.Output)
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := out.Chunks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) != 2 || chunks[0].Text() != "hi" || chunks[1].Kind() != session.KindAssistant || chunks[1].Text() != "hello from the scripted model" {
		t.Fatalf("transcript = %v", chunks)
	}
	v := out.Version()
	if v.Op != session.OpStep || v.Key != r.Steps[0].ID || v.Producer.Run != r.ID || v.Producer.Agent != "echo" || v.Producer.Worker == "" {
		t.Fatalf("output version = %+v", v)
	}
	if v.Usage.TotalTokens == 0 {
		t.Fatalf("output usage is zero: %+v", v.Usage)
	}
	last := events[len(events)-1]
	if last != "run.completed" {
		t.Fatalf("events = %v, want them to end with run.completed", events)
	}
}

func TestDevRunSQLite(t *testing.T) {
	t.Parallel()
	checkScriptedRun(t, startDev(t, "", app.DevConfig{}))
}

func TestDevRunPostgres(t *testing.T) {
	t.Parallel()
	checkScriptedRun(t, startDev(t, testdb.Postgres(t), app.DevConfig{}))
}

func TestBadSubmissions(t *testing.T) {
	t.Parallel()
	s := startDev(t, "", app.DevConfig{Workers: 1})
	ctx := context.Background()
	cases := []struct {
		name   string
		body   map[string]any
		status int
	}{
		{"unknown field", map[string]any{"agent": json.RawMessage(`{"name":"a","model":"scripted","script":[{"content":"x"}],"temprature":1}`), "message": "x"}, 400},
		{"no model", map[string]any{"agent": json.RawMessage(`{"name":"a"}`), "message": "x"}, 400},
		{"unknown session", map[string]any{"agent": json.RawMessage(scriptedSpec), "session": session.NewID().String()}, 400},
		{"bad session id", map[string]any{"agent": json.RawMessage(scriptedSpec), "session": "nope"}, 400},
		{"no input", map[string]any{"agent": json.RawMessage(scriptedSpec)}, 400},
		{"oversized", map[string]any{"agent": json.RawMessage(scriptedSpec), "message": string(make([]byte, 2<<20))}, 413},
	}
	for _, tc := range cases {
		err := s.cl.Do(ctx, "POST", "/v1/runs", tc.body, nil)
		var apiErr *client.APIError
		if !errors.As(err, &apiErr) || apiErr.Status != tc.status {
			t.Errorf("%s: err = %v, want status %d", tc.name, err, tc.status)
		}
	}
	if err := s.cl.Do(ctx, "GET", "/v1/runs/run_nope", nil, nil); err == nil {
		t.Error("unknown run: want 404")
	}
}

// TestDuplicateJobsCommitOnce publishes a step's job again, once with the
// same message id (deduplicated by JetStream) and once with a fresh id (as
// the reconciler does), and checks the step commits exactly once.
func TestDuplicateJobsCommitOnce(t *testing.T) {
	t.Parallel()
	s := startDev(t, "", app.DevConfig{})
	ctx := context.Background()
	r := s.submit(t, scriptedSpec, "hi")
	st := r.Steps[0]
	job := bus.Job{V: bus.JobVersion, StepID: st.ID, RunID: r.ID, Queue: r.Queue, Input: st.Input.String(), Target: r.Target}
	dup, err := s.dev.Backend.Bus.Publish(ctx, job, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !dup {
		t.Fatal("second publish with the same step id was not reported as a duplicate")
	}
	hdr := map[string][]string{bus.HeaderMsgID: {st.ID + "/again"}}
	if dup, err = s.dev.Backend.Bus.Publish(ctx, job, hdr); err != nil {
		t.Fatal(err)
	}
	if dup {
		t.Fatal("publish under a fresh message id was deduplicated; the step must be delivered twice")
	}
	r = s.waitRun(t, r.ID)
	if r.Status != runs.RunSucceeded {
		t.Fatalf("run %s: %s", r.Status, r.Error)
	}
	// Wait until the extra job has been consumed too, then count commits.
	testenv.Eventually(t, 20*time.Second, "the extra job to be consumed", func() bool {
		cons, err := s.dev.Backend.Bus.JetStream().Consumer(ctx, "RATH_JOBS", "jobs-default")
		if err != nil {
			return false
		}
		info, err := cons.Info(ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	})
	v, err := s.dev.Backend.Store.GetByKey(ctx, st.ID)
	if err != nil || v.ID != *r.Output {
		t.Fatalf("version by key = %v, %v; want the run's output %s", v, err, r.Output)
	}
	children, err := s.dev.Backend.Store.Children(ctx, st.Input)
	if err != nil {
		t.Fatal(err)
	}
	if len(children) != 1 {
		t.Fatalf("input has %d children, want exactly 1 commit", len(children))
	}
}

// TestReconcilerRepublishesLostJob records a run whose job was never
// published (a coordinator that died between the two) and checks that the
// reconciler gets it done.
func TestReconcilerRepublishesLostJob(t *testing.T) {
	t.Parallel()
	s := startDev(t, "", app.DevConfig{})
	ctx := context.Background()
	in, err := session.FromUserMessage(ctx, s.dev.Backend.Store, "lost")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := agent.ParseSpec([]byte(scriptedSpec))
	if err != nil {
		t.Fatal(err)
	}
	target, _ := json.Marshal(spec)
	r := runs.Run{ID: runs.NewRunID(), Queue: "default", Target: target, Input: in.ID()}
	if err := s.dev.Backend.Runs.Create(ctx, &r, []runs.Step{{Input: in.ID()}}); err != nil {
		t.Fatal(err)
	}
	c, err := coordinator.New(s.dev.Backend.Store, s.dev.Backend.Runs, s.dev.Backend.Bus, coordinator.Config{StaleAfter: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.Reconciler().ReconcileOnce(ctx)
	if err != nil || n != 1 {
		t.Fatalf("reconcile = %d, %v; want 1 step republished", n, err)
	}
	if r = s.waitRun(t, r.ID); r.Status != runs.RunSucceeded {
		t.Fatalf("run %s: %s", r.Status, r.Error)
	}
}

// TestWorkerCrashAfterCommit commits a step's version as a crashed worker
// would have (commit, no record, no ack), then lets the job run: the step
// must settle on the committed version without a second commit.
func TestWorkerCrashAfterCommit(t *testing.T) {
	t.Parallel()
	s := startDev(t, "", app.DevConfig{Workers: -1})
	ctx := context.Background()
	in, err := session.FromUserMessage(ctx, s.dev.Backend.Store, "x")
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := agent.ParseSpec([]byte(scriptedSpec))
	target, _ := json.Marshal(spec)
	r := runs.Run{ID: runs.NewRunID(), Queue: "default", Target: target, Input: in.ID()}
	if err := s.dev.Backend.Runs.Create(ctx, &r, []runs.Step{{Input: in.ID()}}); err != nil {
		t.Fatal(err)
	}
	stepID := r.Steps[0].ID
	// What the crashed worker committed: the step's output, keyed by the
	// step and produced by it (a keyed put adopts only a replay of the same
	// step's commit).
	early, err := in.Extend(ctx, session.Extension{Op: session.OpStep, Key: stepID, Chunks: []session.Chunk{session.Assistant("committed before the crash")},
		Producer: session.Producer{Run: r.ID, Step: stepID, Worker: "crashed-worker"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.dev.Backend.Bus.Publish(ctx, bus.Job{StepID: stepID, RunID: r.ID, Input: in.ID().String(), Target: target}, nil); err != nil {
		t.Fatal(err)
	}
	w, err := app.NewWorker(ctx, s.dev.Backend, func(string) string { return "" }, workerConfig())
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = w.Run(wctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	r = s.waitRun(t, r.ID)
	if r.Status != runs.RunSucceeded || *r.Output != early.ID() {
		t.Fatalf("run %s output %v, want the version committed before the crash %s", r.Status, r.Output, early.ID())
	}
	children, err := s.dev.Backend.Store.Children(ctx, in.ID())
	if err != nil || len(children) != 1 {
		t.Fatalf("input children = %d (%v), want 1", len(children), err)
	}
}

func workerConfig() worker.Config { return worker.Config{Name: "test-worker", Heartbeat: time.Second} }

// TestDevCloseStopsServices: the dev stack starts the coordinator's
// services (a declarative workflow run completes, which needs the
// workflow driver), and Close returns only once they have stopped.
func TestDevCloseStopsServices(t *testing.T) {
	t.Parallel()
	s := startDev(t, "", app.DevConfig{Workers: 1})
	ctx := context.Background()
	r, err := s.cl.StartWorkflow(ctx, client.WorkflowRequest{
		Workflow: "agents:\n  a: {model: scripted, script: [done]}\nsteps:\n  - agent: a\n", Message: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.waitRun(t, r.ID); got.Status != runs.RunSucceeded {
		t.Fatalf("workflow run %s: %s", got.Status, got.Error)
	}
	s.dev.Close()
	for _, svc := range s.dev.Coordinator.Services() {
		select {
		case <-svc.(interface{ Done() <-chan struct{} }).Done():
		default:
			t.Fatalf("%T still running after Dev.Close", svc)
		}
	}
}
