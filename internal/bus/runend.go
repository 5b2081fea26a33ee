package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Run end events that stop a run's steps while they may still be running.
const (
	// EventRunTimedOut is published when a run's deadline passes.
	EventRunTimedOut = "run.timed_out"
)

// abortTypes are the event types [Bus.SubscribeRunAborts] listens to.
var abortTypes = []string{EventRunCanceled, EventRunTimedOut}

// RunAbortSubjects are the subjects [Bus.SubscribeRunAborts] subscribes to:
// rath.events.*.run.canceled and rath.events.*.run.timed_out. A worker's
// NATS user may subscribe to these and no other event subject
// (internal/natsauth).
func RunAbortSubjects() []string {
	s := make([]string, len(abortTypes))
	for i, typ := range abortTypes {
		s[i] = EventSubject("*", typ)
	}
	return s
}

// RunIDFromAbortSubject returns the run id of a run.canceled or
// run.timed_out event subject (rath.events.<run>.run.canceled), or an error
// naming what is wrong with the subject.
func RunIDFromAbortSubject(subject string) (string, error) {
	e, err := liveEvent(subject, nil)
	if err != nil {
		return "", err
	}
	if !slices.Contains(abortTypes, e.Type) {
		return "", fmt.Errorf("subject %q: want a %s event", subject, strings.Join(abortTypes, " or "))
	}
	return e.RunID, nil
}

// SubscribeRunAborts calls fn with the run id of every run.canceled and
// run.timed_out event published from now on. It uses plain core-NATS
// subscriptions on the connection (the events stream stores the same
// messages; no consumer is created), so it costs the server nothing per
// run and reaches fn within a network round trip of the publish. Delivery
// is best effort: events published while the connection is down are not
// seen, so callers need a fallback (the worker's Touch). fn runs on the
// subscriptions' goroutines and must not block. stop unsubscribes.
func (b *Bus) SubscribeRunAborts(fn func(runID string)) (stop func(), err error) {
	if fn == nil {
		return nil, fmt.Errorf("%w: nil run abort handler", ErrInvalidConfig)
	}
	handle := func(m *nats.Msg) {
		runID, err := RunIDFromAbortSubject(m.Subject)
		if err != nil {
			b.cfg.Logger.Debug("bus: run abort event skipped", "subject", m.Subject, "error", err.Error())
			return
		}
		fn(runID)
	}
	return b.subscribe(context.Background(), "run aborts", RunAbortSubjects(), handle)
}

// subscribe subscribes handle to subjects with plain core-NATS
// subscriptions and waits, under ctx, for the server to have the interest
// (a permissions violation surfaces here, not silently later).
func (b *Bus) subscribe(ctx context.Context, what string, subjects []string, handle nats.MsgHandler) (stop func(), err error) {
	var subs []*nats.Subscription
	stop = func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
	}
	for _, subj := range subjects {
		s, err := b.nc.Subscribe(subj, handle)
		if err != nil {
			stop()
			return nil, fmt.Errorf("subscribe %s: %w", subj, err)
		}
		subs = append(subs, s)
	}
	if err := b.flush(ctx); err != nil {
		stop()
		return nil, fmt.Errorf("subscribe %s: %w", what, err)
	}
	if err := b.nc.LastError(); err != nil && errors.Is(err, nats.ErrPermissionViolation) {
		stop()
		return nil, fmt.Errorf("subscribe %s: %w", what, err)
	}
	return stop, nil
}

// flush waits for the server to have processed what the connection sent:
// until ctx ends, and at most flushWait (nats.Conn.Flush's own limit).
func (b *Bus) flush(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, flushWait)
	defer cancel()
	return b.nc.FlushWithContext(ctx)
}

// flushWait bounds flush.
const flushWait = 10 * time.Second
