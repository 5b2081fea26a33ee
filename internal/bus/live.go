package bus

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
)

// LiveEvent is an event as [Bus.SubscribeEvents] hands it over: its run
// and type, read from the subject, and its encoding, decoded only when
// asked ([LiveEvent.Decode]), so a subscriber that wants few of the
// events it is sent decodes only those.
type LiveEvent struct {
	RunID string
	Type  string
	data  []byte
	// ev is the event already decoded: one of a batch, which is decoded
	// whole to find its events' types.
	ev *Event
}

// Decode decodes the event. The run and type are the subject's.
func (e LiveEvent) Decode() (Event, error) {
	if e.ev != nil {
		return *e.ev, nil
	}
	var ev Event
	if err := json.Unmarshal(e.data, &ev); err != nil {
		return Event{}, fmt.Errorf("event %s/%s: %w", e.RunID, e.Type, err)
	}
	ev.RunID, ev.Type = e.RunID, e.Type
	return ev, nil
}

// SubscribeEvents calls fn with every event of the given types, of every
// run, published from now on: a type may end in ".>" for every type under
// it ("run.>"). Like [Bus.SubscribeRunAborts] it uses plain core-NATS
// subscriptions on the connection, not a consumer of the events stream:
// the server sends each published event once, with no stream delivery,
// flow control or acknowledgement, and nothing is replayed. Delivery is
// best effort: events published while the connection is down are not
// seen ([Bus.Reconnects] tells a subscriber it may have missed some). fn
// runs on the subscriptions' goroutines, one a type: the events of one
// type come in the order they were published (from one publisher), those
// of different types in no set order. It must not block. stop
// unsubscribes. ctx bounds only the subscribing.
//
// A batch ([Bus.PublishEvents]) travels on the subject of its last event:
// a subscription receives it when that event's type is among types, and fn
// is then called for each event of the batch whose type is among types,
// in order. A step whose commit ends its run sends its events and the
// run's end as one batch: a subscriber to step.committed that wants those
// commits too subscribes to run.> as well.
func (b *Bus) SubscribeEvents(ctx context.Context, fn func(LiveEvent), types ...string) (stop func(), err error) {
	if fn == nil {
		return nil, fmt.Errorf("%w: nil event handler", ErrInvalidConfig)
	}
	if len(types) == 0 {
		return nil, fmt.Errorf("%w: subscribe events: no types", ErrInvalidEvent)
	}
	subjects := make([]string, len(types))
	for i, typ := range types {
		if err := validEventType(strings.TrimSuffix(typ, ".>")); err != nil {
			return nil, fmt.Errorf("%w: subscribe events: %w", ErrInvalidEvent, err)
		}
		subjects[i] = EventSubject("*", typ)
	}
	handle := func(m *nats.Msg) {
		e, err := liveEvent(m.Subject, m.Data)
		if err != nil {
			b.cfg.Logger.Debug("bus: event skipped", "subject", m.Subject, "error", err.Error())
			return
		}
		if !isBatch(m.Data) {
			fn(e)
			return
		}
		es, err := decodeBatch(e, m.Subject, m.Data)
		if err != nil {
			b.cfg.Logger.Debug("bus: events skipped", "subject", m.Subject, "error", err.Error())
			return
		}
		for i := range es {
			if matchesType(types, es[i].Type) {
				fn(LiveEvent{RunID: e.RunID, Type: es[i].Type, ev: &es[i]})
			}
		}
	}
	return b.subscribe(ctx, "events", subjects, handle)
}

// matchesType reports whether typ is one of types, or under one ending in
// ".>".
func matchesType(types []string, typ string) bool {
	for _, t := range types {
		if prefix, ok := strings.CutSuffix(t, ">"); ok && strings.HasPrefix(typ, prefix) || t == typ {
			return true
		}
	}
	return false
}

// liveEvent reads an event's run and type from its subject,
// rath.events.<run>.<type>.
func liveEvent(subject string, data []byte) (LiveEvent, error) {
	rest, ok := strings.CutPrefix(subject, "rath.events.")
	if !ok {
		return LiveEvent{}, fmt.Errorf("subject %q: want the prefix rath.events. (an event subject)", subject)
	}
	runID, typ, ok := strings.Cut(rest, ".")
	if !ok {
		return LiveEvent{}, fmt.Errorf("subject %q: no event type after the run id", subject)
	}
	if err := validRunID(runID); err != nil {
		return LiveEvent{}, fmt.Errorf("subject %q: %w", subject, err)
	}
	if err := validEventType(typ); err != nil {
		return LiveEvent{}, fmt.Errorf("subject %q: %w", subject, err)
	}
	return LiveEvent{RunID: runID, Type: typ, data: data}, nil
}

// Reconnects is how many times the bus's connection has reconnected to
// the server. A subscriber of [Bus.SubscribeEvents] that sees it change
// may have missed events published in between.
func (b *Bus) Reconnects() uint64 { return b.nc.Stats().Reconnects }

// Connected reports whether the bus's connection is up.
func (b *Bus) Connected() bool { return b.nc.IsConnected() }
