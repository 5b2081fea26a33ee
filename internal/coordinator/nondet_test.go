package coordinator_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/auth"
	"github.com/rath-run/rath/internal/bus/embedded"
	"github.com/rath-run/rath/internal/coordinator"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/internal/worker"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/flow"
)

// TestChangedYAMLWorkflowResumed: a coordinator-driven workflow run is
// killed mid-run (its driver stops with the first step put, no worker
// running); its stored workflow is edited (the first agent's script
// changed); the next coordinator resumes it and the run fails naming the
// step, its recorded and its new digest. Accepting the changes reopens the
// run; the driver resumes it, keeps the recorded step and finishes.
//
// A declarative run re-reads the workflow stored with it, and the API has
// no way to replace it (a resubmitted file is a new run), so the edit is
// made to the stored row, as an operator's migration would.
func TestChangedYAMLWorkflowResumed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ns, err := embedded.Start(ctx, embedded.Options{StoreDir: filepath.Join(dir, "nats"), Port: -1, InProcess: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	url := "sqlite:" + filepath.Join(dir, "rath.db")
	b, err := app.OpenBackend(ctx, app.BackendConfig{
		StoreURL: url,
		Connect:  func() (*nats.Conn, error) { return ns.Connect(nats.Name("nondet-test")) },
		Migrate:  true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })

	const wf = "agents:\n  a: {model: scripted, script: [first]}\n  b: {model: scripted, script: [unused, second]}\nsteps:\n  - agent: a\n  - agent: b\n"
	cfg := coordinator.Config{Name: "one", LeaseTTL: time.Hour, ReconcileInterval: time.Hour}
	one, err := coordinator.New(b.Store, b.Runs, b.Bus, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := one.Submit(ctx, coordinator.SubmitRequest{Workflow: wf, Message: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if err := one.Services().Start(ctx); err != nil {
		t.Fatal(err)
	}
	var first runs.Step
	testenv.Eventually(t, 30*time.Second, "the driver to put the first step", func() bool {
		got, err := b.Runs.Get(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Steps) == 1 {
			first = got.Steps[0]
		}
		return len(got.Steps) == 1
	})
	stopWithin(t, one.Services(), 30*time.Second) // the kill
	if first.Digest == "" {
		t.Fatalf("the first step recorded no digest: %+v", first)
	}

	// The edit between the kill and the resume.
	rs, db, err := runs.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	edited := strings.Replace(wf, "script: [first]", "script: [changed]", 1)
	if _, err := db.ExecContext(ctx, `UPDATE runs SET workflow = $1 WHERE id = $2`, edited, r.ID); err != nil {
		t.Fatal(err)
	}

	cfg.Name = "two"
	two, err := coordinator.New(b.Store, b.Runs, b.Bus, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := two.Services().Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer stopWithin(t, two.Services(), 30*time.Second)
	var failed runs.Run
	testenv.Eventually(t, 30*time.Second, "the resumed run to fail", func() bool {
		if failed, err = rs.Get(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		return failed.Status.Terminal()
	})
	if failed.Status != runs.RunFailed {
		t.Fatalf("resumed changed run: %s, want failed", failed.Status)
	}
	for _, want := range []string{"step " + first.Key, first.Digest, flow.ErrNondeterministic.Error()} {
		if !strings.Contains(failed.Error, want) {
			t.Errorf("run error %q does not name %q", failed.Error, want)
		}
	}

	// Accept the change: the run reopens, the driver resumes it, and with
	// a worker it finishes, the first step as recorded.
	acc, reopened, err := two.Runs().AcceptChanges(ctx, two.SystemScope(), r.ID)
	if err != nil || !reopened || acc.ChangesAcceptedAt == nil {
		t.Fatalf("AcceptChanges = %+v, %v, %v; want the run reopened", acc, reopened, err)
	}
	w, err := app.NewWorker(ctx, b, func(string) string { return "" }, worker.Config{Name: "w", FetchWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stopWorker := context.WithCancel(ctx)
	workerDone := make(chan struct{})
	go func() { defer close(workerDone); _ = w.Run(wctx) }()
	defer func() { stopWorker(); <-workerDone }()
	var done runs.Run
	testenv.Eventually(t, 60*time.Second, "the accepted run to finish", func() bool {
		if done, err = rs.Get(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		if done.Status.Terminal() && done.Status != runs.RunSucceeded {
			t.Fatalf("accepted run: %s: %s", done.Status, done.Error)
		}
		return done.Status == runs.RunSucceeded
	})
	if len(done.Steps) != 2 || done.Steps[0].Digest != first.Digest || done.Steps[0].Status != runs.StepCommitted {
		t.Fatalf("steps = %+v; want the recorded first step committed and a second", done.Steps)
	}
	tr, err := b.Store.Transcript(ctx, *done.Output)
	if err != nil {
		t.Fatal(err)
	}
	var text []string
	for _, c := range tr {
		text = append(text, c.Text())
	}
	if got := strings.Join(text, ","); !strings.Contains(got, "first") || strings.Contains(got, "changed") {
		t.Fatalf("transcript %q: want the recorded step's reply (first), not the edited one", got)
	}
}

// TestAcceptChangesIsConfined: the attacker's side of POST
// /v1/runs/{id}/accept-changes. A token of tenant umbrella cannot accept
// changes of tenant acme's run (not found), nor can acme's read token
// (403); acme's submit token can, and the acceptance shows on the run.
func TestAcceptChangesIsConfined(t *testing.T) {
	t.Parallel()
	s := newAuthStack(t, "postgres", -1)
	ctx := context.Background()
	newClient := func(tok string) *client.Client {
		cl, err := client.New(s.url, tok)
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	acme := newClient(s.mint(t, auth.ScopeSubmit, "acme").Secret)
	reader := newClient(s.mint(t, auth.ScopeRead, "acme").Secret)
	eve := newClient(s.mint(t, auth.ScopeSubmit, "umbrella").Secret)
	run, err := acme.StartWorkflow(ctx, client.WorkflowRequest{Message: "acme's secret"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eve.AcceptChanges(ctx, run.ID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("umbrella accepts changes of acme's run: %v, want not found", err)
	}
	var ae *client.APIError
	if _, err := reader.AcceptChanges(ctx, run.ID); !errors.As(err, &ae) || ae.Status != http.StatusForbidden {
		t.Errorf("acme's read token accepts changes: %v, want 403", err)
	}
	if got, err := acme.GetRun(ctx, run.ID); err != nil || got.ChangesAcceptedAt != nil {
		t.Fatalf("run after the refused attempts: accepted at %v, %v; want not accepted", got.ChangesAcceptedAt, err)
	}
	reply, err := acme.AcceptChanges(ctx, run.ID)
	if err != nil || reply.Reopened || reply.Run.ChangesAcceptedAt == nil {
		t.Fatalf("acme accepts changes: %+v, %v", reply, err)
	}
	if got, err := acme.GetRun(ctx, run.ID); err != nil || got.ChangesAcceptedAt == nil {
		t.Fatalf("run after acme accepted: accepted at %v, %v", got.ChangesAcceptedAt, err)
	}
	if _, err := eve.AcceptChanges(ctx, "r-nope"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("accept changes of no run: %v, want not found", err)
	}
}
