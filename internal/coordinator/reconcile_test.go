package coordinator_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/coordinator"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/internal/worker"
)

const spec = `{"name":"echo","model":"scripted","script":[{"content":"hi"}]}`

// TestReconcilerLeavesQueuedJobs checks that the reconciler does not
// republish a stale step whose job is still in the queue (waiting behind a
// backlog: here, no worker runs), and does republish it once the job is
// gone from the stream.
func TestReconcilerLeavesQueuedJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	d, err := app.StartDev(ctx, app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", Workers: -1, StoreURL: "sqlite:" + filepath.Join(dir, "rath.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	b := d.Backend
	c, err := coordinator.New(b.Store, b.Runs, b.Bus, coordinator.Config{StaleAfter: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Submit(ctx, coordinator.SubmitRequest{Agent: json.RawMessage(spec), Message: "wait your turn"})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := b.Bus.JetStream().Stream(ctx, bus.JobsStream)
	if err != nil {
		t.Fatal(err)
	}
	msgs := func() uint64 {
		t.Helper()
		info, err := stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}

	n, err := c.Reconciler().ReconcileOnce(ctx)
	if err != nil || n != 0 {
		t.Fatalf("reconcile with the job queued = %d, %v; want nothing republished", n, err)
	}
	if got := msgs(); got != 1 {
		t.Fatalf("stream holds %d jobs, want the 1 submitted", got)
	}

	// Lose the job, as a purged or rebuilt stream would.
	if err := stream.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err = c.Reconciler().ReconcileOnce(ctx); err != nil || n != 1 {
		t.Fatalf("reconcile with the job lost = %d, %v; want 1 republished", n, err)
	}
	if got := msgs(); got != 1 {
		t.Fatalf("stream holds %d jobs after republishing, want 1", got)
	}
	// And the queued republished job is left alone again.
	if n, err = c.Reconciler().ReconcileOnce(ctx); err != nil || n != 0 {
		t.Fatalf("second reconcile = %d, %v; want nothing republished", n, err)
	}

	w, err := app.NewWorker(ctx, b, func(string) string { return "" }, worker.Config{Name: "w", FetchWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(wctx) }()
	t.Cleanup(func() { cancel(); <-done })
	var got runs.Run
	testenv.Eventually(t, 30*time.Second, "the run to end", func() bool {
		var err error
		if got, err = b.Runs.Get(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		return got.Status.Terminal()
	})
	if got.Status != runs.RunSucceeded || got.Steps[0].Attempts != 1 {
		t.Fatalf("run %s, step attempts %d; want succeeded on the first attempt", got.Status, got.Steps[0].Attempts)
	}
}
