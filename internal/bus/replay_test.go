package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/bus/bustest"
)

// ReplayRun reads a run's stored events after a sequence, only that run's
// and in order, with their sequences, and creates no consumer;
// WatchRunAfter follows from the same sequence with the same sequences.
func TestReplayRunAndWatchAfter(t *testing.T) {
	t.Parallel()
	b, _, _ := bustest.New(t)
	ctx := testCtx(t)
	for i := range 10 {
		for _, run := range []string{"run-a", "run-b"} {
			e := bus.Event{RunID: run, Type: bus.EventStepToken, Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
			if err := b.PublishEvent(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.FlushEvents(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := b.JetStream().Stream(ctx, bus.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	consumers := func() int {
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Consumers
	}
	before := consumers()

	var all []bus.StoredEvent
	last, err := b.ReplayRun(ctx, "run-a", 0, func(e bus.StoredEvent) error {
		if n := consumers(); n != before {
			t.Errorf("during a replay the stream has %d consumers, want %d", n, before)
		}
		all = append(all, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 10 || last != all[9].Seq {
		t.Fatalf("replay of run-a: %d events, last %d; want 10 ending at the last's seq", len(all), last)
	}
	for i, e := range all {
		var d struct{ I int }
		_ = json.Unmarshal(e.Data, &d)
		if e.RunID != "run-a" || d.I != i || i > 0 && e.Seq <= all[i-1].Seq {
			t.Fatalf("replayed event %d: %+v", i, e)
		}
	}

	// After the 4th: the 5th on, the same seqs; an error from fn ends it.
	var tail []uint64
	if _, err := b.ReplayRun(ctx, "run-a", all[3].Seq, func(e bus.StoredEvent) error {
		tail = append(tail, e.Seq)
		return nil
	}); err != nil || len(tail) != 6 || tail[0] != all[4].Seq {
		t.Fatalf("replay after %d: %v, %v; want the 6 from %d", all[3].Seq, tail, err, all[4].Seq)
	}
	stop := errors.New("stop")
	if _, err := b.ReplayRun(ctx, "run-a", 0, func(bus.StoredEvent) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("replay whose fn fails: %v, want its error", err)
	}
	if _, err := b.ReplayRun(ctx, "a.>", 0, func(bus.StoredEvent) error { return nil }); !errors.Is(err, bus.ErrInvalidEvent) {
		t.Fatalf("ReplayRun(bad id): %v", err)
	}

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, _, err := b.WatchRunAfter(wctx, "run-a", all[7].Seq)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range all[8:] {
		select {
		case e := <-ch:
			if e.Seq != want.Seq || e.RunID != "run-a" {
				t.Fatalf("watch after %d: %+v, want seq %d", all[7].Seq, e, want.Seq)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no event within 5s")
		}
	}
}

// Progress events (published without a PubAck) and acknowledged events
// interleaved on one bus are stored in the order they were published: once
// the last acknowledged event's ack is in, a replay (direct gets, only what
// is stored) finds every progress event before it, in order.
func TestPublishProgressKeepsOrder(t *testing.T) {
	t.Parallel()
	b, _, _ := bustest.New(t)
	ctx := testCtx(t)
	const steps, tokens = 50, 4
	var want []string
	for s := range steps {
		for _, run := range []string{"run-a", "run-b"} {
			step := fmt.Sprintf("s%d", s)
			if err := b.PublishProgress(ctx, bus.Event{RunID: run, StepID: step, Type: bus.EventStepStarted}); err != nil {
				t.Fatal(err)
			}
			for i := range tokens {
				e := bus.Event{RunID: run, StepID: step, Type: bus.EventStepToken, Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
				if err := b.PublishProgress(ctx, e); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.PublishEvent(ctx, bus.Event{RunID: run, StepID: step, Type: bus.EventStepCommitted}); err != nil {
				t.Fatal(err)
			}
			if run == "run-a" {
				want = append(want, step+" "+bus.EventStepStarted)
				for i := range tokens {
					want = append(want, fmt.Sprintf("%s %s %d", step, bus.EventStepToken, i))
				}
				want = append(want, step+" "+bus.EventStepCommitted)
			}
		}
	}
	if err := b.FlushEvents(ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	if _, err := b.ReplayRun(ctx, "run-a", 0, func(e bus.StoredEvent) error {
		s := e.StepID + " " + e.Type
		if e.Type == bus.EventStepToken {
			var d struct{ I int }
			if err := json.Unmarshal(e.Data, &d); err != nil {
				return err
			}
			s += fmt.Sprintf(" %d", d.I)
		}
		got = append(got, s)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("replayed %d events, want %d in publish order:\ngot  %v\nwant %v", len(got), len(want), got, want)
	}
}
