package worker

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/rath-run/rath/internal/bus"
)

// countingEvents counts the events published through it, by whether they
// asked for an acknowledgement.
type countingEvents struct {
	mu           sync.Mutex
	acked, quiet int
}

func (c *countingEvents) PublishEvents(_ context.Context, es []bus.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.acked += len(es)
	return nil
}

func (c *countingEvents) PublishProgressEvents(_ context.Context, es []bus.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.quiet += len(es)
	return nil
}

// A linger so short its timer fires while the step is being set up, or
// while it ends: every event goes out once, and (under -race) nothing
// races. The timer once fired before holdEvents had stored it, and its
// release read the field being written (TestWorkerHeap under -race).
func TestStepEventsLingerRacesTheStep(t *testing.T) {
	ev := &countingEvents{}
	w := &Worker{cfg: Config{EventLinger: 1}, events: ev, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	const steps = 5000
	var wg sync.WaitGroup
	for i := range steps {
		wg.Go(func() {
			ctx, release := w.holdEvents(context.Background())
			defer release()
			w.progress(ctx, bus.Event{RunID: "run_a", Type: "step.started"})
			if i%2 == 0 {
				w.publish(ctx, bus.Event{RunID: "run_a", Type: "step.committed"})
			}
		})
	}
	wg.Wait()
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if ev.acked+ev.quiet != steps+steps/2 || ev.acked < steps/2 {
		t.Errorf("published %d acknowledged and %d not, want %d events in all, the %d ends acknowledged", ev.acked, ev.quiet, steps+steps/2, steps/2)
	}
}
