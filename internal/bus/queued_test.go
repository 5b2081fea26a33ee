package bus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/bus/bustest"
	"github.com/rath-run/rath/pkg/session"
)

func TestQueuedSteps(t *testing.T) {
	t.Parallel()
	b, _, _ := bustest.New(t)
	ctx := context.Background()
	publish := func(queue, step string) {
		t.Helper()
		job := bus.Job{StepID: step, RunID: "run_q", Queue: queue, Input: session.NewID().String(), Target: json.RawMessage(`{}`)}
		if _, err := b.Publish(ctx, job, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		publish("default", fmt.Sprintf("run_q/%d", i))
	}
	publish("other", "run_q/other")

	got, complete, err := b.QueuedSteps(ctx, "default", 10)
	if err != nil || !complete || len(got) != 3 || !got["run_q/0"] || !got["run_q/2"] || got["run_q/other"] {
		t.Fatalf("QueuedSteps(default, 10) = %v, %v, %v; want the 3 default steps, complete", got, complete, err)
	}
	got, complete, err = b.QueuedSteps(ctx, "default", 2)
	if err != nil || complete || len(got) != 2 {
		t.Fatalf("QueuedSteps(default, 2) = %v, %v, %v; want 2 steps, incomplete", got, complete, err)
	}

	// An acked job leaves the queue.
	cons, err := b.Consumer(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	ds, err := cons.Fetch(ctx, 1, time.Second)
	if err != nil || len(ds) != 1 {
		t.Fatalf("fetch = %d, %v", len(ds), err)
	}
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	got, complete, err = b.QueuedSteps(ctx, "default", 10)
	if err != nil || !complete || len(got) != 2 || got[ds[0].Job.StepID] {
		t.Fatalf("after ack: %v, %v, %v; want the 2 others", got, complete, err)
	}
	got, complete, err = b.QueuedSteps(ctx, "empty", 10)
	if err != nil || !complete || len(got) != 0 {
		t.Fatalf("empty queue: %v, %v, %v", got, complete, err)
	}
	if _, _, err := b.QueuedSteps(ctx, "Bad Queue", 10); err == nil {
		t.Fatal("invalid queue name accepted")
	}
	if _, _, err := b.QueuedSteps(ctx, "default", 0); err == nil {
		t.Fatal("limit 0 accepted")
	}
}
