package bus

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/nats-io/nats.go/jetstream"
)

// StoredEvent is an event with its place in the events stream.
type StoredEvent struct {
	// Seq is the sequence in RATH_EVENTS of the message that holds the
	// event: increasing across all runs, so a run's events have
	// increasing (not consecutive) Seqs, but the events of a batch
	// ([Bus.PublishEvents]) share their message's.
	Seq uint64
	// Last reports whether the event is its message's last (always, for
	// an event published alone). A reader resumes after a message, not
	// inside one: the API sends Seq as the SSE id of a message's last
	// event only, and a client resumes after it.
	Last bool
	Event
}

// plain adapts a watch of stored events to one of events.
func plain(ch <-chan StoredEvent, failure func() error, err error) (<-chan Event, func() error, error) {
	if err != nil {
		return nil, nil, err
	}
	out := make(chan Event, cap(ch))
	go func() {
		defer close(out)
		for e := range ch {
			out <- e.Event
		}
	}()
	return out, failure, nil
}

// WatchRunAfter is [Bus.WatchRun] from the event after stream sequence
// after (0: from the run's first stored event), with each event's
// sequence. It holds one consumer while it lasts, like WatchRun.
func (b *Bus) WatchRunAfter(ctx context.Context, runID string, after uint64) (<-chan StoredEvent, func() error, error) {
	if err := validRunID(runID); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	if after == math.MaxUint64 {
		after-- // after+1 must not wrap to 0 (from the start)
	}
	return b.watch(ctx, after, "rath.events."+runID+".>")
}

// ReplayRun calls fn with each event of runID stored after stream sequence
// after, in order, up to the last one stored when it reads it, and returns
// the sequence of the last message whose events it passed on whole (after
// when none). It creates no consumer: each message (an event, or a batch
// of them) is one direct get of the next message on rath.events.<run>.>
// (the events stream allows direct gets), so replaying holds nothing on
// the server between gets and costs one request per message. Messages
// that cannot be decoded are skipped. An error from fn ends the replay and
// is returned as is.
func (b *Bus) ReplayRun(ctx context.Context, runID string, after uint64, fn func(StoredEvent) error) (uint64, error) {
	if err := validRunID(runID); err != nil {
		return after, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	s, err := b.eventsStream(ctx)
	if err != nil {
		return after, err
	}
	filter := "rath.events." + runID + ".>"
	for {
		m, err := s.GetMsg(ctx, after+1, jetstream.WithGetMsgSubject(filter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return after, nil
		}
		if err != nil {
			return after, fmt.Errorf("replay run %s after %d: %w", runID, after, translate(ctx, err))
		}
		es, err := DecodeEvents(m.Subject, m.Data)
		if err != nil {
			b.cfg.Logger.DebugContext(ctx, "bus: undecodable event skipped", "subject", m.Subject, "error", err.Error())
			after = m.Sequence
			continue
		}
		for i, e := range es {
			if err := fn(StoredEvent{Seq: m.Sequence, Last: i == len(es)-1, Event: e}); err != nil {
				return after, err
			}
		}
		after = m.Sequence
	}
}

// eventsStream returns a handle on RATH_EVENTS, looked up once.
func (b *Bus) eventsStream(ctx context.Context) (jetstream.Stream, error) {
	b.eventsMu.Lock()
	defer b.eventsMu.Unlock()
	if b.events != nil {
		return b.events, nil
	}
	s, err := b.js.Stream(ctx, EventsStream)
	if err != nil {
		return nil, fmt.Errorf("look up stream %s: %w", EventsStream, translate(ctx, err))
	}
	b.events = s
	return s, nil
}
