package bus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/pkg/session"
)

// testJob returns a valid job for queue q with a unique-per-name step id.
func testJob(q, step string) bus.Job {
	return bus.Job{
		StepID: step,
		RunID:  "run-1",
		Queue:  q,
		Input:  session.NewID().String(),
		Target: json.RawMessage(`{"agent":"echo"}`),
	}
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustPublish(ctx context.Context, t *testing.T, b *bus.Bus, j bus.Job) {
	t.Helper()
	dup, err := b.Publish(ctx, j, nil)
	if err != nil {
		t.Fatalf("publish %s: %v", j.StepID, err)
	}
	if dup {
		t.Fatalf("publish %s: unexpected duplicate", j.StepID)
	}
}

// fetchOne fetches exactly one delivery within maxWait or fails.
func fetchOne(ctx context.Context, t *testing.T, c *bus.Consumer, maxWait time.Duration) *bus.Delivery {
	t.Helper()
	ds, err := c.Fetch(ctx, 1, maxWait)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if len(ds) != 1 {
		t.Fatalf("fetch: got %d deliveries within %s, want 1", len(ds), maxWait)
	}
	return ds[0]
}

// fetchNone asserts nothing is delivered within window.
func fetchNone(ctx context.Context, t *testing.T, c *bus.Consumer, window time.Duration) {
	t.Helper()
	ds, err := c.Fetch(ctx, 1, window)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if len(ds) != 0 {
		t.Fatalf("fetch within %s: got %s (delivery %d), want nothing", window, ds[0].Job.StepID, ds[0].NumDelivered())
	}
}

func streamMsgs(ctx context.Context, t *testing.T, b *bus.Bus, name string) uint64 {
	t.Helper()
	return streamInfo(ctx, t, b, name).State.Msgs
}

func streamInfo(ctx context.Context, t *testing.T, b *bus.Bus, name string) *jetstream.StreamInfo {
	t.Helper()
	s, err := b.JetStream().Stream(ctx, name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("stream info %s: %v", name, err)
	}
	return info
}

func consumerInfo(ctx context.Context, t *testing.T, b *bus.Bus, queue string) *jetstream.ConsumerInfo {
	t.Helper()
	c, err := b.JetStream().Consumer(ctx, bus.JobsStream, bus.ConsumerName(queue))
	if err != nil {
		t.Fatalf("consumer %s: %v", queue, err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatalf("consumer info %s: %v", queue, err)
	}
	return info
}

func stepIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return ids
}
