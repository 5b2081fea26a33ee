package coordinator

import (
	"context"
	"log/slog"
	"time"

	"github.com/rath-run/rath/internal/service"
)

// EventFeed is the service that wakes step waits (GET and PUT
// /v1/runs/{id}/steps/{key}?wait=, the workflow driver's steps) from one
// watch of every event on the bus, instead of each polling the run store.
// Without it (stopped, or a bus that cannot watch everything) the waits
// still end: they poll every 200 ms instead of every 5 s.
type EventFeed struct {
	service.Base
	bus     Bus
	waiters *stepWaiters
	log     *slog.Logger
}

// Start implements [service.Service].
func (f *EventFeed) Start(ctx context.Context) error {
	return f.Go(ctx, f.run)
}

// run feeds the waiters until ctx ends, watching again (after a second)
// when a watch fails. Each watch is read to its end: the bus closes its
// channel once the watch's own goroutines are done.
func (f *EventFeed) run(ctx context.Context) {
	aw, ok := f.bus.(allWatcher)
	if !ok {
		return
	}
	for ctx.Err() == nil {
		// Only the events stepWaiters.notify acts on (it ignores
		// run.submitted among run.>): the feed is not sent a step's
		// started, token and reply events, several per step.
		events, _, err := aw.WatchAll(ctx, "step.committed", "step.failed", "run.>")
		if err != nil {
			f.log.DebugContext(ctx, "step waiters: watch events", slog.Any("error", err))
			t := time.NewTimer(time.Second)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
			continue
		}
		f.waiters.fed.Store(true)
		for e := range events {
			f.waiters.notify(e)
		}
		f.waiters.fed.Store(false)
	}
}
