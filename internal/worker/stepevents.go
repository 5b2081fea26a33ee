package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/rath-run/rath/internal/bus"
)

// DefaultEventLinger is Config.EventLinger's default.
const DefaultEventLinger = 20 * time.Millisecond

// stepEvents gathers a step's events into as few messages of the events
// stream as a watcher can wait for (issue 25: a step's events were a
// message each, stored and indexed one by one). From the step's start it
// holds what the step publishes (started, tokens, the model's events) for
// up to Config.EventLinger: a step that ends within it sends its events
// and its end (committed, failed, waiting, needs review, and the run's end
// when the step ends the run) as one acknowledged batch
// (bus.Bus.PublishEvents), one message where there were four or five. A
// step still running when the linger passes sends what it holds then, and
// its later events as they come, as before: a watcher of a slow step sees
// it start at most a linger late, and no event is held longer.
//
// Every event keeps the time it happened (publish and progress stamp it
// when it is made, not when it goes out). What is held when the step
// leaves without an end event (handed back, retried, aborted) goes out on
// its way out.
type stepEvents struct {
	w   *Worker
	ctx context.Context // the step's, without its cancellation: held events go out after an abort too

	mu    sync.Mutex
	held  []bus.Event
	live  bool        // events go out as they come: the linger passed, or the step ended
	timer *time.Timer // releases the held events when the linger passes
}

// stepEventsKey is the context key of a step's stepEvents.
type stepEventsKey struct{}

// holdEvents returns ctx carrying a new stepEvents for the step it runs
// (publish and progress find it there) and a function that releases what
// it still holds, for the step's way out.
func (w *Worker) holdEvents(ctx context.Context) (context.Context, func()) {
	se := &stepEvents{w: w, ctx: context.WithoutCancel(ctx)}
	if w.cfg.EventLinger < 0 {
		se.live = true
	} else {
		// Under the lock: the timer may fire before AfterFunc returns,
		// and release reads se.timer.
		se.mu.Lock()
		se.timer = time.AfterFunc(w.cfg.EventLinger, se.release)
		se.mu.Unlock()
	}
	return context.WithValue(ctx, stepEventsKey{}, se), se.release
}

// stepEventsFrom returns the stepEvents ctx carries, or nil outside a step.
func stepEventsFrom(ctx context.Context) *stepEvents {
	se, _ := ctx.Value(stepEventsKey{}).(*stepEvents)
	return se
}

// add holds e, or publishes it now without an acknowledgement once the
// step's events go out as they come.
func (se *stepEvents) add(e bus.Event) {
	se.mu.Lock()
	defer se.mu.Unlock()
	if !se.live {
		se.held = append(se.held, e)
		return
	}
	se.w.sendAll(se.ctx, []bus.Event{e}, se.w.events.PublishProgressEvents)
}

// release publishes the held events without an acknowledgement (a later
// acknowledged event of the run follows them on the connection) and lets
// the step's later events go out as they come.
func (se *stepEvents) release() {
	se.mu.Lock()
	defer se.mu.Unlock()
	se.goLive()
	if len(se.held) > 0 {
		se.w.sendAll(se.ctx, se.held, se.w.events.PublishProgressEvents)
		se.held = nil
	}
}

// end publishes the held events and es, the step's end, as one
// acknowledged batch; events after it go out as they come.
func (se *stepEvents) end(es []bus.Event) {
	se.mu.Lock()
	defer se.mu.Unlock()
	se.goLive()
	se.held = append(se.held, es...)
	se.w.sendAll(se.ctx, se.held, se.w.events.PublishEvents)
	se.held = nil
}

// goLive stops holding events. Called with se.mu held.
func (se *stepEvents) goLive() {
	se.live = true
	if se.timer != nil {
		se.timer.Stop()
	}
}

// publish publishes es (stamped now), a step's end or any event that asks
// for the server's acknowledgement, in one message: inside a step, after
// the events the step holds, in the same message.
func (w *Worker) publish(ctx context.Context, es ...bus.Event) {
	stamp(es)
	if se := stepEventsFrom(ctx); se != nil {
		se.end(es)
		return
	}
	w.sendAll(ctx, es, w.events.PublishEvents)
}

// progress publishes an event inside a step (started, tokens, the model's
// events) without asking for an acknowledgement: the step holds it for its
// linger (stepEvents), and the step ends with an acknowledged event
// published after it on the same connection (committed, failed, waiting,
// needs review; the run's end), which the stream stores after it.
func (w *Worker) progress(ctx context.Context, e bus.Event) {
	e.Time = time.Now().UTC()
	if se := stepEventsFrom(ctx); se != nil {
		se.add(e)
		return
	}
	w.sendAll(ctx, []bus.Event{e}, w.events.PublishProgressEvents)
}

// stamp sets each event's time to now: the time it happened, whenever it
// goes out.
func stamp(es []bus.Event) {
	now := time.Now().UTC()
	for i := range es {
		es[i].Time = now
	}
}

// sendAll publishes es with pub; events are best effort.
func (w *Worker) sendAll(ctx context.Context, es []bus.Event, pub func(context.Context, []bus.Event) error) {
	if len(es) == 0 {
		return
	}
	if err := pub(ctx, es); err != nil {
		w.log.Debug("events not published", slog.String("type", es[len(es)-1].Type), slog.Int("events", len(es)), slog.Any("error", err))
	}
}
