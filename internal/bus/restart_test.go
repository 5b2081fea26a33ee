package bus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/bus/bustest"
	"github.com/rath-run/rath/internal/bus/embedded"
	"github.com/rath-run/rath/internal/testenv"
)

// A server restart on the same store and port keeps unacked jobs (pending
// and delivered-but-unacked), the connection reconnects by itself, and
// Fetch, Ack and Publish work again.
func TestServerRestart(t *testing.T) {
	t.Parallel()
	b, srv, nc := bustest.NewWith(t, bustest.Options{Config: bus.Config{AckWait: testAckWait}})
	ctx := testCtx(t)
	c, err := b.Consumer(ctx, "restart")
	if err != nil {
		t.Fatal(err)
	}
	ids := stepIDs("restart", 3)
	for _, id := range ids {
		mustPublish(ctx, t, b, testJob("restart", id))
	}
	inflight := fetchOne(ctx, t, c, 5*time.Second) // delivered, never acked

	opts := srv.Options()
	srv.Shutdown()
	testenv.Eventually(t, 5*time.Second, "client to notice the shutdown", func() bool { return !nc.IsConnected() })
	// While the server is down a Fetch either times out empty (the pull
	// request sits in the reconnect buffer) or reports ErrUnavailable.
	if ds, err := c.Fetch(ctx, 1, 200*time.Millisecond); err != nil && !errors.Is(err, bus.ErrUnavailable) || len(ds) != 0 {
		t.Fatalf("fetch while down: %d deliveries, err %v; want none and nil or ErrUnavailable", len(ds), err)
	}

	// Publishing while down fails with ErrUnavailable, but the message may
	// sit in the reconnect buffer and be stored later.
	pctx, pcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = b.Publish(pctx, testJob("restart", "during"), nil)
	pcancel()
	if !errors.Is(err, bus.ErrUnavailable) {
		t.Fatalf("publish while down: %v, want ErrUnavailable", err)
	}
	ids = append(ids, "during")

	srv2, err := embedded.Start(ctx, opts)
	if err != nil {
		t.Fatalf("restart on %s port %d: %v", opts.StoreDir, opts.Port, err)
	}
	t.Cleanup(srv2.Shutdown)
	if srv2.Port() != opts.Port {
		t.Fatalf("restarted on port %d, want %d", srv2.Port(), opts.Port)
	}
	testenv.Eventually(t, 10*time.Second, "client to reconnect", nc.IsConnected)
	// The retry of the failed publish is safe: the step is stored once.
	if _, err := b.Publish(ctx, testJob("restart", "during"), nil); err != nil {
		t.Fatalf("retry publish after restart: %v", err)
	}

	// A restart may cause redeliveries (pull requests that were in flight),
	// so a step may be seen again; what must hold is that each step is
	// stored once (one stream sequence) and all of them arrive.
	seen := map[string]uint64{}
	seqs := map[string]uint64{}
	deadline := time.Now().Add(20 * time.Second)
	for len(seen) < len(ids) {
		if time.Now().After(deadline) {
			t.Fatalf("after restart got %v, want all of %v", seen, ids)
		}
		ds, err := c.Fetch(ctx, 3, time.Second)
		if err != nil {
			if errors.Is(err, bus.ErrUnavailable) {
				continue // JetStream still recovering
			}
			t.Fatalf("fetch after restart: %v", err)
		}
		for _, d := range ds {
			if s, ok := seqs[d.Job.StepID]; ok && s != d.StreamSeq() {
				t.Fatalf("step %s stored twice: stream seqs %d and %d", d.Job.StepID, s, d.StreamSeq())
			}
			seqs[d.Job.StepID] = d.StreamSeq()
			seen[d.Job.StepID] = max(seen[d.Job.StepID], d.NumDelivered())
			if err := d.Ack(ctx); err != nil {
				t.Fatalf("ack after restart: %v", err)
			}

		}
	}
	if seen[inflight.Job.StepID] < 2 {
		t.Fatalf("in-flight job %s delivered %d times, want a redelivery", inflight.Job.StepID, seen[inflight.Job.StepID])
	}
	mustPublish(ctx, t, b, testJob("restart", "after"))
	d := fetchOne(ctx, t, c, 5*time.Second)
	if d.Job.StepID != "after" {
		t.Fatalf("got %s", d.Job.StepID)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if n := streamMsgs(ctx, t, b, bus.JobsStream); n != 0 {
		t.Fatalf("%d jobs left", n)
	}
}
