package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/bus/bustest"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/internal/worker"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/llm"
)

// TestShutdownLosesNoJobToItsPoll: a job published while a stopping
// worker's long poll is still open at the server is not lost. The server
// sends it to the open poll; the worker must run it or leave it to
// another worker with its deliveries intact. With MaxDeliver 1 a job the
// stopping worker received and handed back (a canceled poll's late
// delivery, Nak'ed) would never be delivered again.
func TestShutdownLosesNoJobToItsPoll(t *testing.T) {
	t.Parallel()
	b, _, nc := bustest.NewWith(t, bustest.Options{Config: bus.Config{MaxDeliver: 1}})
	st, rs := openStores(t)
	r := &rig{bus: b, nc: nc, graph: st, runs: rs}
	ctx := context.Background()
	newWorker := func(name string, fetchWait time.Duration) *worker.Worker {
		cons, err := b.Consumer(ctx, bus.DefaultQueue)
		if err != nil {
			t.Fatal(err)
		}
		w, err := worker.New(st, rs, cons, b, scriptedResolve, worker.Config{Name: name, Slots: 1, MaxDeliver: 1,
			FetchWait: fetchWait, ShutdownTimeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}

	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	// A long poll, so that the one open when the worker is told to stop
	// is still open when the job is published.
	stopping := newWorker("stopping", 20*time.Second)
	go func() { done <- stopping.Run(wctx) }()
	testenv.Eventually(t, 10*time.Second, "the worker's long poll to wait at the server", func() bool {
		c, err := b.JetStream().Consumer(ctx, bus.JobsStream, bus.ConsumerName(bus.DefaultQueue))
		if err != nil {
			return false // not declared yet
		}
		ci, err := c.Info(ctx)
		return err == nil && ci.NumWaiting == 1
	})
	stop()
	run, _ := r.submitAgent(t, agent.Spec{Name: "quick", Model: "scripted", Script: []llm.ScriptReply{{Content: "done"}}}, 1)
	stopped := time.Now()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stopping worker: %v", err)
		}
		got, err := rs.Get(ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("stopping worker returned after %s; run %s", time.Since(stopped), got.Status)
	case <-time.After(40 * time.Second):
		t.Fatal("the stopping worker did not return within 40s")
	}

	// Whatever the stopping worker left, a second worker finds.
	runWorker(t, newWorker("next", 200*time.Millisecond))
	if got := r.waitRun(t, run.ID); got.Status != runs.RunSucceeded {
		t.Fatalf("run %s: %s (%s), want succeeded", run.ID, got.Status, got.Error)
	}
}
