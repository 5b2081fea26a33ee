package coordinator_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/bus/embedded"
	"github.com/rath-run/rath/internal/coordinator"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/service"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/internal/worker"
)

// openBackend opens a SQLite store and an embedded NATS server, with no
// coordinator or worker running on them.
func openBackend(t *testing.T) *app.Backend {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	ns, err := embedded.Start(ctx, embedded.Options{StoreDir: filepath.Join(dir, "nats"), Port: -1, InProcess: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	b, err := app.OpenBackend(ctx, app.BackendConfig{
		StoreURL: "sqlite:" + filepath.Join(dir, "rath.db"),
		Connect:  func() (*nats.Conn, error) { return ns.Connect(nats.Name("services-test")) },
		Migrate:  true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// stopWithin stops g and fails when it has not returned within d.
func stopWithin(t *testing.T, g service.Group, d time.Duration) {
	t.Helper()
	stopped := make(chan struct{})
	go func() { defer close(stopped); g.Stop() }()
	select {
	case <-stopped:
	case <-time.After(d):
		t.Fatalf("Stop did not return within %s", d)
	}
	for _, s := range g {
		select {
		case <-s.(interface{ Done() <-chan struct{} }).Done():
		default:
			t.Fatalf("%T: Stop returned before its work did", s)
		}
	}
}

// TestServicesStopAndHandOver: the coordinator starts no goroutine until
// its program starts its services; stopping them waits for all their
// goroutines (the workflow driver's per-run drivers and the event feed's
// watch among them: none is left) and hands the work over: the run the
// stopped driver was driving is still running, and a second coordinator
// takes both leases at once (their TTL is an hour) and finishes it.
//
// Not parallel: the goroutine checks compare with the goroutines before.
func TestServicesStopAndHandOver(t *testing.T) {
	ctx := context.Background()
	b := openBackend(t)
	// The bus's connection makes its async-publish reply subscription on
	// its first event (it lasts as long as the connection): make it now.
	if err := b.Bus.PublishEvent(ctx, bus.Event{RunID: "warm-up", Type: "test.warm_up"}); err != nil {
		t.Fatal(err)
	}
	before := goleak.IgnoreCurrent()
	cfg := coordinator.Config{Name: "one", LeaseTTL: time.Hour, ReconcileInterval: time.Hour}
	one, err := coordinator.New(b.Store, b.Runs, b.Bus, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := one.Submit(ctx, coordinator.SubmitRequest{
		Workflow: "agents:\n  a: {model: scripted, script: [done]}\nsteps:\n  - agent: a\n", Message: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, before) // New and Submit start nothing

	services := one.Services()
	if err := services.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// No worker runs: the driver puts the workflow's step and waits on it.
	testenv.Eventually(t, 30*time.Second, "the driver to put the run's step", func() bool {
		got, err := b.Runs.Get(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		return len(got.Steps) == 1
	})
	stopWithin(t, services, 30*time.Second)
	goleak.VerifyNone(t, before)
	if got, err := b.Runs.Get(ctx, r.ID); err != nil || got.Status != runs.RunRunning {
		t.Fatalf("run after the driver stopped: %s, %v; want it running, handed back", got.Status, err)
	}

	// Another replica, and a worker: the run resumes and ends.
	cfg.Name = "two"
	two, err := coordinator.New(b.Store, b.Runs, b.Bus, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := two.Services().Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer stopWithin(t, two.Services(), 30*time.Second)
	w, err := app.NewWorker(ctx, b, func(string) string { return "" }, worker.Config{Name: "w", FetchWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stopWorker := context.WithCancel(ctx)
	workerDone := make(chan struct{})
	go func() { defer close(workerDone); _ = w.Run(wctx) }()
	defer func() { stopWorker(); <-workerDone }()
	testenv.Eventually(t, 60*time.Second, "the second coordinator to finish the run", func() bool {
		got, err := b.Runs.Get(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Terminal() && got.Status != runs.RunSucceeded {
			t.Fatalf("run %s: %s", got.Status, got.Error)
		}
		return got.Status == runs.RunSucceeded
	})
	// The reconciler's lease passed too: "two" holds it, "one" cannot.
	if ok, err := b.Runs.AcquireLease(ctx, "reconciler", "one", time.Hour); err != nil || ok {
		t.Fatalf("reconciler lease: one took it back (%v, %v); want two holding it", ok, err)
	}
}

// TestServicesStartTwice: a running service refuses a second start, and
// a stopped one starts again.
func TestServicesStartTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := openBackend(t)
	c, err := coordinator.New(b.Store, b.Runs, b.Bus, coordinator.Config{Name: "twice"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Services().Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Reconciler().Start(ctx); err == nil {
		t.Fatal("a second Start of the running reconciler succeeded")
	}
	stopWithin(t, c.Services(), 30*time.Second)
	if err := c.Services().Start(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	stopWithin(t, c.Services(), 30*time.Second)
}
