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
)

// A batch is one message of the events stream, on its last event's
// subject, and every reader sees its events as if published alone, in
// order: a watch and a replay (which mark the message's last event), and
// a live subscription (each event of a type it asked for, when the
// batch's last is one).
func TestPublishEventsIsOneMessage(t *testing.T) {
	t.Parallel()
	b, _, nc := bustest.New(t)
	ctx := testCtx(t)
	got := make(chan bus.LiveEvent, 16)
	stop, err := b.SubscribeEvents(ctx, func(e bus.LiveEvent) { got <- e }, bus.EventStepCommitted, "run.>")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	raw, err := nc.SubscribeSync(bus.EventSubject("run_a", ">"))
	if err != nil {
		t.Fatal(err)
	}
	step := bus.Event{RunID: "run_a", StepID: "run_a/0"}
	batch := []bus.Event{
		{RunID: "run_a", StepID: "run_a/0", Type: bus.EventStepStarted},
		{RunID: "run_a", StepID: "run_a/0", Type: bus.EventStepToken, Data: json.RawMessage(`{"text": "hi"}`)},
		{RunID: "run_a", StepID: "run_a/0", Type: bus.EventStepCommitted, Data: json.RawMessage(`{"version":"v"}`)},
		{RunID: "run_a", Type: bus.EventRunCompleted},
	}
	if err := b.PublishProgress(ctx, bus.Event{RunID: "run_a", Type: "run.submitted"}); err != nil {
		t.Fatal(err)
	}
	if err := b.PublishEvents(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if err := b.FlushEvents(ctx); err != nil {
		t.Fatal(err)
	}

	// On the wire: two messages, the batch on its last event's subject.
	var subjects []string
	for range 2 {
		m, err := raw.NextMsg(30 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		subjects = append(subjects, m.Subject)
	}
	if want := []string{bus.EventSubject("run_a", "run.submitted"), bus.EventSubject("run_a", bus.EventRunCompleted)}; fmt.Sprint(subjects) != fmt.Sprint(want) {
		t.Errorf("messages on %v, want %v", subjects, want)
	}

	// Replayed: five events in two messages, the last of each marked.
	var replayed []string
	last, err := b.ReplayRun(ctx, "run_a", 0, func(e bus.StoredEvent) error {
		replayed = append(replayed, fmt.Sprintf("%d %s %v", e.Seq, e.Type, e.Last))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"1 run.submitted true", "2 step.started false", "2 step.token false", "2 step.committed false", "2 run.completed true"}
	if fmt.Sprint(replayed) != fmt.Sprint(want) || last != 2 {
		t.Errorf("replayed %q up to %d, want %q up to 2", replayed, last, want)
	}

	// Watched from after the first message: the batch, marked the same.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, _, err := b.WatchRunAfter(wctx, "run_a", 1)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range want[1:] {
		select {
		case e := <-ch:
			if got := fmt.Sprintf("%d %s %v", e.Seq, e.Type, e.Last); got != w {
				t.Errorf("watched event %d: %q, want %q", i, got, w)
			}
			if e.Type == bus.EventStepToken && string(e.Data) != `{"text":"hi"}` {
				t.Errorf("the token's data: %s", e.Data)
			}
		case <-wctx.Done():
			t.Fatal("the batch was not watched")
		}
	}

	// Live: the events of the types asked for, in order (all came on the
	// run.> subscription).
	for _, w := range []string{"run.submitted", bus.EventStepCommitted, bus.EventRunCompleted} {
		select {
		case le := <-got:
			e, err := le.Decode()
			if err != nil || le.Type != w || e.Type != w || le.RunID != "run_a" || e.RunID != "run_a" {
				t.Fatalf("live: %s %s (decoded %+v, %v), want run_a %s", le.RunID, le.Type, e, err, w)
			}
			if w == bus.EventStepCommitted && (e.StepID != step.StepID || string(e.Data) != `{"version":"v"}`) {
				t.Errorf("live step.committed: %+v", e)
			}
		case <-ctx.Done():
			t.Fatalf("live %s not received", w)
		}
	}
	select {
	case le := <-got:
		t.Fatalf("live: unexpected %s %s (not asked for)", le.RunID, le.Type)
	default:
	}
}

// Events that together pass MaxEventSize go in as many messages as it
// takes, in order; one too large by itself is left out and named, the
// rest published; events of two runs are refused whole.
func TestPublishEventsBounds(t *testing.T) {
	t.Parallel()
	b, _, _ := bustest.New(t)
	ctx := testCtx(t)
	text := func(n int) json.RawMessage { return json.RawMessage(`"` + strings.Repeat("x", n) + `"`) }
	es := []bus.Event{
		{RunID: "run_b", Type: bus.EventStepToken, Data: text(bus.MaxEventSize / 2)},
		{RunID: "run_b", Type: bus.EventStepToken, Data: text(bus.MaxEventSize / 2)},
		{RunID: "run_b", Type: bus.EventStepToken, Data: text(bus.MaxEventSize)},
		{RunID: "run_b", Type: bus.EventStepCommitted},
	}
	err := b.PublishEvents(ctx, es)
	if !errors.Is(err, bus.ErrTooLarge) || !strings.Contains(err.Error(), bus.EventStepToken) {
		t.Fatalf("PublishEvents with an event past the limit: %v, want ErrTooLarge naming it", err)
	}
	if err := b.FlushEvents(ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	if _, err := b.ReplayRun(ctx, "run_b", 0, func(e bus.StoredEvent) error {
		got = append(got, fmt.Sprintf("%d %s %d", e.Seq, e.Type, len(e.Data)))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	half := bus.MaxEventSize/2 + 2
	want := []string{fmt.Sprintf("1 step.token %d", half), fmt.Sprintf("2 step.token %d", half), "2 step.committed 0"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("stored %v, want %v", got, want)
	}

	err = b.PublishEvents(ctx, []bus.Event{{RunID: "run_c", Type: bus.EventStepStarted}, {RunID: "run_d", Type: bus.EventStepCommitted}})
	if !errors.Is(err, bus.ErrInvalidEvent) || !strings.Contains(err.Error(), "run_d") {
		t.Fatalf("a batch of two runs: %v, want ErrInvalidEvent naming the other run", err)
	}
	for _, run := range []string{"run_c", "run_d"} {
		if _, err := b.ReplayRun(ctx, run, 0, func(e bus.StoredEvent) error {
			t.Errorf("a refused batch stored %s %s", e.RunID, e.Type)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// DecodeEvents reads what the stream stores: one event, or a batch whose
// events are all the subject's run's and whose last is of the subject's
// type; anything else is refused with the reason.
func TestDecodeEvents(t *testing.T) {
	t.Parallel()
	subj := bus.EventSubject("run_a", bus.EventStepCommitted)
	for _, c := range []struct {
		name, subject, data string
		types               []string
		refusal             string
	}{
		{"one event", subj, `{"run_id":"run_a","type":"step.committed"}`, []string{"step.committed"}, ""},
		{"a batch", subj, ` [{"run_id":"run_a","type":"step.started"},{"run_id":"run_a","type":"step.committed"}]`, []string{"step.started", "step.committed"}, ""},
		{"an empty batch", subj, `[]`, nil, "empty"},
		{"another run's event in a batch", subj, `[{"run_id":"run_b","type":"step.started"},{"run_id":"run_a","type":"step.committed"}]`, nil, "run_b"},
		{"a batch ending with another type", subj, `[{"run_id":"run_a","type":"step.committed"},{"run_id":"run_a","type":"step.started"}]`, nil, "step.started"},
		{"a batch on no event subject", "rath.jobs.default", `[{"run_id":"run_a","type":"step.committed"}]`, nil, "rath.jobs.default"},
		{"not JSON", subj, `[{`, nil, subj},
	} {
		es, err := bus.DecodeEvents(c.subject, []byte(c.data))
		if c.refusal != "" {
			if err == nil || !strings.Contains(err.Error(), c.refusal) {
				t.Errorf("%s: %v, %v; want a refusal naming %q", c.name, es, err, c.refusal)
			}
			continue
		}
		var types []string
		for _, e := range es {
			types = append(types, e.Type)
		}
		if err != nil || fmt.Sprint(types) != fmt.Sprint(c.types) {
			t.Errorf("%s: %v, %v; want %v", c.name, types, err, c.types)
		}
	}
}
