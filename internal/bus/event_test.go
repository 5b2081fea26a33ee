package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/bus/bustest"
	"github.com/rath-run/rath/internal/testenv"
)

func recv(t *testing.T, ch <-chan bus.Event, timeout time.Duration) bus.Event {
	t.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatal("event channel closed early")
		}
		return e
	case <-time.After(timeout):
		t.Fatalf("no event within %s", timeout)
	}
	return bus.Event{}
}

// WatchRun replays a run's events in order from the start, only that run's,
// then follows it live; cancel closes the channel with a nil Err.
func TestWatchRun(t *testing.T) {
	t.Parallel()
	b, _, _ := bustest.New(t)
	ctx := testCtx(t)
	types := []string{bus.EventStepStarted, bus.EventStepToken, bus.EventStepToolCall, bus.EventStepCommitted}
	const n = 40
	for i := range n {
		e := bus.Event{RunID: "run-a", StepID: fmt.Sprintf("s%d", i/4), Type: types[i%4], Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
		if err := b.PublishEvent(ctx, e); err != nil {
			t.Fatal(err)
		}
		if err := b.PublishEvent(ctx, bus.Event{RunID: "run-b", Type: bus.EventStepToken, Data: json.RawMessage(`{"other":true}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.FlushEvents(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	ch, errf, err := b.WatchRun(wctx, "run-a")
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		e := recv(t, ch, 5*time.Second)
		var d struct{ I int }
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		if e.RunID != "run-a" || d.I != i || e.Type != types[i%4] || e.Time.IsZero() {
			t.Fatalf("event %d: got %+v (data %s)", i, e, e.Data)
		}
	}
	// Live: an event published after the replay arrives too.
	if err := b.PublishEvent(ctx, bus.Event{RunID: "run-a", Type: bus.EventRunCompleted}); err != nil {
		t.Fatal(err)
	}
	if e := recv(t, ch, 5*time.Second); e.Type != bus.EventRunCompleted {
		t.Fatalf("live event: %+v", e)
	}
	cancel()
	for range ch { // drains and ends: the channel closes
	}
	if err := errf(); err != nil {
		t.Fatalf("Err after cancel = %v, want nil", err)
	}
}

func TestEventValidation(t *testing.T) {
	t.Parallel()
	b, _, _ := bustest.New(t)
	ctx := testCtx(t)
	tests := []struct {
		name  string
		e     bus.Event
		want  error
		field string
	}{
		{"empty run", bus.Event{Type: "step.started"}, bus.ErrInvalidEvent, "run_id"},
		{"run with dot", bus.Event{RunID: "a.b", Type: "step.started"}, bus.ErrInvalidEvent, "run_id"},
		{"empty type", bus.Event{RunID: "r"}, bus.ErrInvalidEvent, "type"},
		{"type uppercase", bus.Event{RunID: "r", Type: "Step"}, bus.ErrInvalidEvent, "type"},
		{"type wildcard", bus.Event{RunID: "r", Type: "step.>"}, bus.ErrInvalidEvent, "type"},
		{"type empty part", bus.Event{RunID: "r", Type: "step..x"}, bus.ErrInvalidEvent, "empty part"},
		{"type trailing dot", bus.Event{RunID: "r", Type: "step."}, bus.ErrInvalidEvent, "ends with"},
		{"type leading dot", bus.Event{RunID: "r", Type: ".step"}, bus.ErrInvalidEvent, "empty part"},
		{"bad data", bus.Event{RunID: "r", Type: "x", Data: json.RawMessage(`{`)}, bus.ErrInvalidEvent, "data"},
		{"oversize", bus.Event{RunID: "r", Type: "x", Data: json.RawMessage(`"` + strings.Repeat("x", bus.MaxEventSize) + `"`)}, bus.ErrTooLarge, "limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := b.PublishEvent(ctx, tt.e)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("PublishEvent: err = %v, want %v naming %q", err, tt.want, tt.field)
			}
			err = b.PublishProgress(ctx, tt.e)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("PublishProgress: err = %v, want %v naming %q", err, tt.want, tt.field)
			}
		})
	}
	if _, _, err := b.WatchRun(ctx, "a.>"); !errors.Is(err, bus.ErrInvalidEvent) {
		t.Fatalf("WatchRun(bad id): %v", err)
	}
}

// A watch's consumer is deleted when the watch ends, not left to the
// server's inactivity threshold (30 s): event streams come and go with API
// clients, and the events stream's consumer limit is shared.
func TestWatchEndDeletesConsumer(t *testing.T) {
	t.Parallel()
	b, _, _ := bustest.New(t)
	ctx := testCtx(t)
	consumers := func() int {
		s, err := b.JetStream().Stream(ctx, bus.EventsStream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Consumers
	}
	before := consumers()
	var cancels []context.CancelFunc
	var chans []<-chan bus.Event
	for i := range 5 {
		wctx, cancel := context.WithCancel(ctx)
		ch, _, err := b.WatchRun(wctx, fmt.Sprintf("run-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		cancels, chans = append(cancels, cancel), append(chans, ch)
	}
	if n := consumers(); n != before+5 {
		t.Fatalf("consumers with 5 watches: %d, want %d", n, before+5)
	}
	for i, cancel := range cancels {
		cancel()
		for range chans[i] {
		}
	}
	testenv.Eventually(t, 5*time.Second, "the ended watches' consumers are deleted", func() bool { return consumers() == before })
}

// SubscribeEvents hands over the events of the types asked for (a family
// with ".>"), of every run, with the run and type from the subject; it
// refuses a bad type naming it.
func TestSubscribeEvents(t *testing.T) {
	t.Parallel()
	b, _, _ := bustest.New(t)
	ctx := testCtx(t)
	if _, err := b.SubscribeEvents(ctx, func(bus.LiveEvent) {}, "Step.X"); !errors.Is(err, bus.ErrInvalidEvent) || !strings.Contains(err.Error(), "Step.X") {
		t.Fatalf("SubscribeEvents(Step.X): %v, want ErrInvalidEvent naming it", err)
	}
	if _, err := b.SubscribeEvents(ctx, func(bus.LiveEvent) {}); !errors.Is(err, bus.ErrInvalidEvent) {
		t.Fatalf("SubscribeEvents(): %v, want ErrInvalidEvent", err)
	}
	got := make(chan bus.LiveEvent, 16)
	stop, err := b.SubscribeEvents(ctx, func(e bus.LiveEvent) { got <- e }, bus.EventStepCommitted, "run.>")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for _, e := range []bus.Event{
		{RunID: "run_a", StepID: "run_a/0", Type: bus.EventStepStarted},
		{RunID: "run_a", StepID: "run_a/0", Type: bus.EventStepCommitted, Data: json.RawMessage(`{"version":"v"}`)},
		{RunID: "run_b", Type: "run.succeeded"},
	} {
		if err := b.PublishEvent(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.FlushEvents(ctx); err != nil {
		t.Fatal(err)
	}
	// One subscription a type: the two types come in either order.
	want := map[string]string{"run_a step.committed": "run_a/0", "run_b run.succeeded": ""}
	for range 2 {
		select {
		case le := <-got:
			e, err := le.Decode()
			if err != nil {
				t.Fatal(err)
			}
			k := le.RunID + " " + le.Type
			step, ok := want[k]
			if !ok || e.StepID != step || e.RunID != le.RunID || e.Type != le.Type {
				t.Fatalf("got %s (decoded %s %s step %q); want one of %v", k, e.RunID, e.Type, e.StepID, want)
			}
			delete(want, k)
		case <-ctx.Done():
			t.Fatalf("events not received: %v", want)
		}
	}
	// The step.started published first was not asked for (a check that
	// sees only what has arrived by now).
	select {
	case le := <-got:
		t.Fatalf("unexpected event %s %s", le.RunID, le.Type)
	default:
	}
}

// TestAttackEventsCannotStarveJobs: a tenant's agent decides how many
// events its steps publish (every token batch is one). Events and jobs
// share JetStream's storage; unbounded, the events of a few chatty runs
// filled it, and then no job of any tenant could be published. Bounded
// (Config.EventsMaxBytes), the oldest events go first and jobs still go.
func TestAttackEventsCannotStarveJobs(t *testing.T) {
	t.Parallel()
	const limit = bus.MinEventsMaxBytes
	b, _, _ := bustest.NewWith(t, bustest.Options{
		MaxFileStore: 3 * limit, // the server's whole JetStream storage
		Config:       bus.Config{EventsMaxBytes: limit},
	})
	ctx := testCtx(t)
	text := strings.Repeat("x", 60<<10)
	data, err := json.Marshal(map[string]string{"text": text})
	if err != nil {
		t.Fatal(err)
	}
	// Twice the server's storage in token events, from one run.
	n := 2 * 3 * limit / len(text)
	for i := range n {
		e := bus.Event{RunID: "chatty", StepID: "s1", Type: bus.EventStepToken, Data: data}
		if err := b.PublishEvent(ctx, e); err != nil {
			t.Fatalf("event %d of %d: %v", i, n, err)
		}
		if i%64 == 63 {
			if err := b.FlushEvents(ctx); err != nil {
				t.Fatalf("flush after event %d: %v", i, err)
			}
		}
	}
	if err := b.FlushEvents(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	// Jobs of every tenant still go.
	for i := range 20 {
		mustPublish(ctx, t, b, testJob("starve", fmt.Sprintf("job-%d", i)))
	}
	info := streamInfo(ctx, t, b, bus.EventsStream)
	if info.State.Bytes > uint64(limit) {
		t.Fatalf("RATH_EVENTS holds %d bytes, bound %d", info.State.Bytes, limit)
	}
	if info.State.FirstSeq <= 1 {
		t.Fatalf("RATH_EVENTS first sequence %d: nothing old was dropped", info.State.FirstSeq)
	}
	// The newest events are kept: a watcher of a live run sees them.
	last := bus.Event{RunID: "chatty", StepID: "s1", Type: bus.EventStepCommitted, Data: json.RawMessage(`{}`)}
	if err := b.PublishEvent(ctx, last); err != nil {
		t.Fatal(err)
	}
	if err := b.FlushEvents(ctx); err != nil {
		t.Fatal(err)
	}
	if got := streamInfo(ctx, t, b, bus.EventsStream).State.LastSeq; got != info.State.LastSeq+1 {
		t.Fatalf("after the bound: last sequence %d, want %d", got, info.State.LastSeq+1)
	}
}
