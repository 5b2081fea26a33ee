package bus_test

import (
	"errors"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/bus/bustest"
	"github.com/rath-run/rath/internal/bus/embedded"
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
		mustPublish(t, ctx, b, testJob("restart", id))
	}
	inflight := fetchOne(t, ctx, c, 5*time.Second) // delivered, never acked

	opts := srv.Options()
	srv.Shutdown()
	eventually(t, 5*time.Second, "client to notice the shutdown", func() bool { return !nc.IsConnected() })
	// While the server is down a Fetch either times out empty (the pull
	// request sits in the reconnect buffer) or reports ErrUnavailable.
	if ds, err := c.Fetch(ctx, 1, 200*time.Millisecond); err != nil && !errors.Is(err, bus.ErrUnavailable) || len(ds) != 0 {
		t.Fatalf("fetch while down: %d deliveries, err %v; want none and nil or ErrUnavailable", len(ds), err)
	}

	srv2, err := embedded.Start(ctx, opts)
	if err != nil {
		t.Fatalf("restart on %s port %d: %v", opts.StoreDir, opts.Port, err)
	}
	t.Cleanup(srv2.Shutdown)
	if srv2.Port() != opts.Port {
		t.Fatalf("restarted on port %d, want %d", srv2.Port(), opts.Port)
	}
	eventually(t, 10*time.Second, "client to reconnect", nc.IsConnected)

	seen := map[string]uint64{}
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
			seen[d.Job.StepID] = d.NumDelivered()
			if err := d.Ack(ctx); err != nil {
				t.Fatalf("ack after restart: %v", err)
			}
		}
	}
	if seen[inflight.Job.StepID] < 2 {
		t.Fatalf("in-flight job %s delivered %d times, want a redelivery", inflight.Job.StepID, seen[inflight.Job.StepID])
	}
	mustPublish(t, ctx, b, testJob("restart", "after"))
	d := fetchOne(t, ctx, c, 5*time.Second)
	if d.Job.StepID != "after" {
		t.Fatalf("got %s", d.Job.StepID)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if n := streamMsgs(t, ctx, b, bus.JobsStream); n != 0 {
		t.Fatalf("%d jobs left", n)
	}
}
