package coordinator

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/service"
)

// EventFeed is the service that wakes step waits (GET and PUT
// /v1/runs/{id}/steps/{key}?wait=, the workflow driver's steps) from one
// subscription to the events they end on, instead of each polling the run
// store. Without it (stopped, or a bus that cannot subscribe) the waits
// still end: they poll every 200 ms instead of every 5 s.
//
// The subscription is core NATS ([bus.Bus.SubscribeEvents]), not a
// consumer of the events stream: the server sends each event once, and an
// event of a run nobody waits on is dropped without being decoded. Events
// published while the connection is down are lost, so the feed wakes every
// waiter when the connection drops or comes back (each reads its step
// again) and lets them poll fast while it is down.
//
// The feed is subscribed only while someone waits, and for Linger after
// the last waiter left: a coordinator serving only agent runs is sent
// none of their events (three a step, each a message from the server to
// the coordinator for nothing). The first waiter subscribes it at once;
// until the subscription is live that waiter polls fast, and when it is,
// every waiter reads its step again (as after a reconnect), so an event
// published in between is not missed.
type EventFeed struct {
	service.Base
	bus     Bus
	waiters *stepWaiters
	log     *slog.Logger
	// Linger is how long the feed stays subscribed after the last waiter
	// left (0: feedLinger): a workflow driver's next wait comes soon.
	Linger time.Duration
}

// feedLinger is EventFeed.Linger's default.
const feedLinger = 30 * time.Second

// eventSubscriber is a bus that can subscribe to every run's events (the
// real bus).
type eventSubscriber interface {
	SubscribeEvents(ctx context.Context, fn func(bus.LiveEvent), types ...string) (stop func(), err error)
	Reconnects() uint64
	Connected() bool
}

// feedCheck is how often the feed looks at its connection.
const feedCheck = time.Second

// Start implements [service.Service].
func (f *EventFeed) Start(ctx context.Context) error {
	return f.Go(ctx, f.run)
}

// run subscribes while there are waiters (again a second later when that
// fails), unsubscribes once they have been gone for Linger, and watches
// the connection, until ctx ends.
func (f *EventFeed) run(ctx context.Context) {
	es, ok := f.bus.(eventSubscriber)
	if !ok {
		return
	}
	tick := time.NewTicker(feedCheck)
	defer tick.Stop()
	var stop func()
	defer func() {
		f.waiters.fed.Store(false)
		if stop != nil {
			stop()
		}
	}()
	linger := cmp.Or(f.Linger, feedLinger)
	demand := f.waiters.demanded()
	reconnects := es.Reconnects()
	for {
		want := f.waiters.wanted(time.Now(), linger)
		if !want && stop != nil {
			stop()
			stop = nil
		}
		if want && stop == nil {
			// Only the events stepWaiters.notify acts on: not a step's
			// started, token and reply events, several per step.
			var err error
			stop, err = es.SubscribeEvents(ctx, f.waiters.notifyLive, "step.committed", "step.failed", "run.>")
			if err != nil {
				stop = nil
				f.log.DebugContext(ctx, "step waiters: subscribe to events", slog.Any("error", err))
			}
		}
		up := stop != nil && es.Connected()
		if n := es.Reconnects(); n != reconnects || up != f.waiters.fed.Load() {
			// Events may have been missed (or will be, while down): every
			// waiter reads its step again now.
			reconnects = n
			f.waiters.fed.Store(up)
			f.waiters.wakeAll()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-demand:
		}
	}
}
