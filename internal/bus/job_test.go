package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/bus/bustest"
	"github.com/rath-run/rath/internal/testenv"
)

func TestPublishValidation(t *testing.T) {
	t.Parallel()
	b, _, _ := bustest.New(t)
	ctx := testCtx(t)
	tests := []struct {
		name   string
		mutate func(*bus.Job)
		hdr    nats.Header
		want   error
		field  string
	}{
		{"unknown version", func(j *bus.Job) { j.V = 2 }, nil, bus.ErrInvalidJob, "v ="},
		{"empty step id", func(j *bus.Job) { j.StepID = "" }, nil, bus.ErrInvalidJob, "step_id"},
		{"step id with space", func(j *bus.Job) { j.StepID = "a b" }, nil, bus.ErrInvalidJob, "step_id"},
		{"step id with newline", func(j *bus.Job) { j.StepID = "a\nb" }, nil, bus.ErrInvalidJob, "step_id"},
		{"step id too long", func(j *bus.Job) { j.StepID = strings.Repeat("s", bus.MaxStepIDLen+1) }, nil, bus.ErrInvalidJob, "limit 256"},
		{"empty run id", func(j *bus.Job) { j.RunID = "" }, nil, bus.ErrInvalidJob, "run_id"},
		{"run id with dot", func(j *bus.Job) { j.RunID = "a.b" }, nil, bus.ErrInvalidJob, "run_id"},
		{"run id wildcard", func(j *bus.Job) { j.RunID = "*" }, nil, bus.ErrInvalidJob, "run_id"},
		{"queue uppercase", func(j *bus.Job) { j.Queue = "GPU" }, nil, bus.ErrInvalidQueue, "queue"},
		{"queue with dot", func(j *bus.Job) { j.Queue = "a.b" }, nil, bus.ErrInvalidQueue, "queue"},
		{"queue too long", func(j *bus.Job) { j.Queue = strings.Repeat("q", 65) }, nil, bus.ErrInvalidQueue, "1..64"},
		{"empty input", func(j *bus.Job) { j.Input = "" }, nil, bus.ErrInvalidJob, "input"},
		{"input not a version id", func(j *bus.Job) { j.Input = "v1" }, nil, bus.ErrInvalidJob, "input"},
		{"empty target", func(j *bus.Job) { j.Target = nil }, nil, bus.ErrInvalidJob, "target"},
		{"target not json", func(j *bus.Job) { j.Target = json.RawMessage(`{"a":`) }, nil, bus.ErrInvalidJob, "target"},
		{"oversize", func(j *bus.Job) {
			j.Target = json.RawMessage(`"` + strings.Repeat("x", bus.MaxJobSize) + `"`)
		}, nil, bus.ErrTooLarge, "limit 1048576"},
		{"bad message id header", nil, nats.Header{nats.MsgIdHdr: {"has space"}}, bus.ErrInvalidJob, "Nats-Msg-Id"},
		{"header name with colon", nil, nats.Header{"a:b": {"x"}}, bus.ErrInvalidJob, "header name"},
		{"header value with CRLF", nil, nats.Header{"traceparent": {"x\r\nInjected: y"}}, bus.ErrInvalidJob, "traceparent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j := testJob("", "valid-step")
			if tt.mutate != nil {
				tt.mutate(&j)
			}
			_, err := b.Publish(ctx, j, tt.hdr)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Publish: err = %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("error %q does not name %q", err, tt.field)
			}
		})
	}
}

// Publishing the same StepID twice stores one message; the second publish
// reports duplicate=true even when the payload differs.
func TestPublishDuplicate(t *testing.T) {
	t.Parallel()
	b, _, _ := bustest.New(t)
	ctx := testCtx(t)
	j := testJob("dup", "step-dup")
	dup, err := b.Publish(ctx, j, nil)
	if err != nil || dup {
		t.Fatalf("first publish: dup=%v err=%v", dup, err)
	}
	j.Target = json.RawMessage(`{"agent":"other"}`)
	dup, err = b.Publish(ctx, j, nil)
	if err != nil || !dup {
		t.Fatalf("second publish: dup=%v err=%v, want dup=true", dup, err)
	}
	if n := streamMsgs(ctx, t, b, bus.JobsStream); n != 1 {
		t.Fatalf("stream holds %d messages, want 1", n)
	}
	c, err := b.Consumer(ctx, "dup")
	if err != nil {
		t.Fatal(err)
	}
	d := fetchOne(ctx, t, c, 5*time.Second)
	if string(d.Job.Target) != `{"agent":"echo"}` {
		t.Fatalf("stored target %s, want the first publish's", d.Job.Target)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	fetchNone(ctx, t, c, 300*time.Millisecond)
}

// A caller-set Nats-Msg-Id wins over StepID: a reconciler can re-send a
// step inside the dedupe window under a fresh message id.
func TestPublishMsgIDOverride(t *testing.T) {
	t.Parallel()
	b, _, _ := bustest.New(t)
	ctx := testCtx(t)
	j := testJob("resend", "step-r")
	mustPublish(ctx, t, b, j)
	retry := nats.Header{nats.MsgIdHdr: {"step-r/again"}}
	for i, want := range []bool{false, true} {
		dup, err := b.Publish(ctx, j, retry)
		if err != nil || dup != want {
			t.Fatalf("re-send %d: dup=%v err=%v, want dup=%v", i, dup, err, want)
		}
	}
	if n := streamMsgs(ctx, t, b, bus.JobsStream); n != 2 {
		t.Fatalf("stream holds %d, want 2 (original and re-send)", n)
	}
	c, err := b.Consumer(ctx, "resend")
	if err != nil {
		t.Fatal(err)
	}
	ds, err := c.Fetch(ctx, 2, 5*time.Second)
	if err != nil || len(ds) != 2 {
		t.Fatalf("fetch: %d, %v", len(ds), err)
	}
	if ds[0].Header.Get(nats.MsgIdHdr) != "step-r" || ds[1].Header.Get(nats.MsgIdHdr) != "step-r/again" ||
		ds[1].Job.StepID != "step-r" {
		t.Fatalf("message ids %q %q, step %q", ds[0].Header.Get(nats.MsgIdHdr), ds[1].Header.Get(nats.MsgIdHdr), ds[1].Job.StepID)
	}
	for _, d := range ds {
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// The envelope and headers round-trip: defaults filled, trace context
// carried, Nats-Msg-Id is the step id.
func TestPublishRoundTrip(t *testing.T) {
	t.Parallel()
	fixed := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	b, _, _ := bustest.NewWith(t, bustest.Options{Config: bus.Config{NowFunc: func() time.Time { return fixed }}})
	ctx := testCtx(t)
	hdr := nats.Header{}
	carrier := bus.HeaderCarrier(hdr)
	carrier.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	carrier.Set("tracestate", "rath=1")
	j := testJob("", "step-rt") // empty queue: default
	mustPublish(ctx, t, b, j)
	c, err := b.Consumer(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Queue() != bus.DefaultQueue {
		t.Fatalf("queue %q, want default", c.Queue())
	}
	// No trace headers were published with this job.
	d := fetchOne(ctx, t, c, 5*time.Second)
	if d.Err != nil {
		t.Fatalf("delivery err: %v", d.Err)
	}
	if d.Job.V != bus.JobVersion || d.Job.Queue != bus.DefaultQueue || !d.Job.CreatedAt.Equal(fixed) ||
		d.Job.StepID != j.StepID || d.Job.RunID != j.RunID || d.Job.Input != j.Input || string(d.Job.Target) != string(j.Target) {
		t.Fatalf("round trip: got %+v, want %+v with defaults", d.Job, j)
	}
	if got := d.Header.Get(bus.HeaderMsgID); got != j.StepID {
		t.Fatalf("Nats-Msg-Id = %q, want %q", got, j.StepID)
	}
	if got := d.Header.Get(bus.HeaderJobVersion); got != "1" {
		t.Fatalf("Rath-Job-Version = %q", got)
	}
	if d.NumDelivered() != 1 || d.StreamSeq() == 0 {
		t.Fatalf("NumDelivered=%d StreamSeq=%d", d.NumDelivered(), d.StreamSeq())
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}

	j2 := testJob("", "step-rt-2")
	if _, err := b.Publish(ctx, j2, hdr); err != nil {
		t.Fatal(err)
	}
	d = fetchOne(ctx, t, c, 5*time.Second)
	in := bus.HeaderCarrier(d.Header)
	if in.Get("traceparent") != carrier.Get("traceparent") || in.Get("tracestate") != "rath=1" {
		t.Fatalf("trace headers lost: %v", d.Header)
	}
	keys := in.Keys()
	slices.Sort(keys)
	if !slices.Contains(keys, "traceparent") || !slices.Contains(keys, bus.HeaderMsgID) {
		t.Fatalf("Keys() = %v", keys)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if n := streamMsgs(ctx, t, b, bus.JobsStream); n != 0 {
		t.Fatalf("acked jobs left in work queue: %d", n)
	}
}

func TestHeaderCarrierNil(t *testing.T) {
	t.Parallel()
	var c bus.HeaderCarrier
	c.Set("traceparent", "x") // must not panic
	if c.Get("traceparent") != "" || len(c.Keys()) != 0 {
		t.Fatal("nil carrier holds values")
	}
}

// Two Consumer() calls on one queue share the durable: no 10099/10100
// error, and concurrent workers fetching from both see every job once.
func TestSharedConsumer(t *testing.T) {
	t.Parallel()
	b, _, _ := bustest.New(t)
	ctx := testCtx(t)
	c1, err := b.Consumer(ctx, "shared")
	if err != nil {
		t.Fatal(err)
	}
	c2, err := b.Consumer(ctx, "shared")
	if err != nil {
		t.Fatalf("second Consumer on the same queue: %v", err)
	}
	// Another queue on the same work-queue stream must not overlap either.
	if _, err := b.Consumer(ctx, "other"); err != nil {
		t.Fatalf("Consumer on another queue: %v", err)
	}
	const total = 60
	ids := stepIDs("shared", total)
	for _, id := range ids {
		mustPublish(ctx, t, b, testJob("shared", id))
	}

	var (
		mu   sync.Mutex
		seen = map[string]int{}
		wg   sync.WaitGroup
		errs = make(chan error, 4)
	)
	for _, c := range []*bus.Consumer{c1, c2, c1, c2} {
		wg.Go(func() {
			for {
				mu.Lock()
				n := len(seen)
				mu.Unlock()
				if n >= total {
					return
				}
				ds, err := c.Fetch(ctx, 5, 200*time.Millisecond)
				if err != nil {
					errs <- err
					return
				}
				for _, d := range ds {
					mu.Lock()
					seen[d.Job.StepID]++
					mu.Unlock()
					if err := d.Ack(ctx); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("worker: %v", err)
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Fatalf("job %s delivered %d times, want 1", id, seen[id])
		}
	}
	fetchNone(ctx, t, c1, 300*time.Millisecond)
	if n := streamMsgs(ctx, t, b, bus.JobsStream); n != 0 {
		t.Fatalf("%d jobs left after acking all", n)
	}
}

func TestFetchArguments(t *testing.T) {
	t.Parallel()
	b, _, _ := bustest.NewWith(t, bustest.Options{Config: bus.Config{MaxAckPending: 8}})
	ctx := testCtx(t)
	c, err := b.Consumer(ctx, "args")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, -1} {
		if _, err := c.Fetch(ctx, n, time.Millisecond); !errors.Is(err, bus.ErrInvalidConfig) || !strings.Contains(err.Error(), "at least 1") {
			t.Fatalf("Fetch(n=%d): err = %v", n, err)
		}
	}
	// More than MaxAckPending asks for MaxAckPending: a worker pulls for
	// all its free slots.
	for i := range 9 {
		mustPublish(ctx, t, b, testJob("args", fmt.Sprintf("many-%d", i)))
	}
	var many []*bus.Delivery
	testenv.Eventually(t, 5*time.Second, "a fetch of more than MaxAckPending to return MaxAckPending jobs", func() bool {
		ds, err := c.Fetch(ctx, 9, 0)
		if err != nil {
			t.Fatalf("Fetch(n=9): %v", err)
		}
		many = append(many, ds...)
		return len(many) >= 8
	})
	if len(many) != 8 {
		t.Fatalf("fetched %d jobs with 8 unacknowledged at most", len(many))
	}
	for _, d := range many {
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ninth, err := c.Fetch(ctx, 9, 5*time.Second)
	if err != nil || len(ninth) != 1 {
		t.Fatalf("the ninth job: %d jobs, %v", len(ninth), err)
	}
	if err := ninth[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Consumer(ctx, "Bad Queue"); !errors.Is(err, bus.ErrInvalidQueue) {
		t.Fatalf("Consumer(bad): err = %v", err)
	}
	// maxWait 0: only what is there now.
	ds, err := c.Fetch(ctx, 1, 0)
	if err != nil || len(ds) != 0 {
		t.Fatalf("Fetch no-wait on empty queue: %d, %v", len(ds), err)
	}
	mustPublish(ctx, t, b, testJob("args", "nowait"))
	testenv.Eventually(t, 5*time.Second, "no-wait fetch to return the job", func() bool {
		ds, err = c.Fetch(ctx, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(ds) == 1
	})
	if ds[0].Job.StepID != "nowait" {
		t.Fatalf("got %s", ds[0].Job.StepID)
	}
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// Fetch returns promptly with ctx's error when ctx ends, and a job that
// arrives after that is not lost.
func TestFetchRespectsContext(t *testing.T) {
	t.Parallel()
	b, _, _ := bustest.New(t)
	ctx := testCtx(t)
	c, err := b.Consumer(ctx, "ctx")
	if err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := c.Fetch(fctx, 1, time.Minute)
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Fetch after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Fetch ignored ctx cancellation")
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("Fetch took %s to notice cancellation", el)
	}
	if _, err := c.Fetch(fctx, 1, time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("Fetch with canceled ctx: %v", err)
	}
	mustPublish(ctx, t, b, testJob("ctx", "after-cancel"))
	d := fetchOne(ctx, t, c, 5*time.Second)
	if d.Job.StepID != "after-cancel" {
		t.Fatalf("got %s", d.Job.StepID)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}
