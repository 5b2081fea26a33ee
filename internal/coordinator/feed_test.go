package coordinator

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/bus/bustest"
	"github.com/rath-run/rath/internal/bus/embedded"
	"github.com/rath-run/rath/internal/testenv"
)

// startFeed starts an event feed on b, stopped by t.Cleanup. It
// subscribes once someone waits (live).
func startFeed(t *testing.T, b Bus) *stepWaiters {
	t.Helper()
	sw := &stepWaiters{}
	f := &EventFeed{bus: b, waiters: sw, log: slog.New(slog.DiscardHandler)}
	if err := f.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	return sw
}

// live waits for the feed to subscribe for its waiters and takes the
// wake-up its subscribing gave each of chans (every waiter reads its step
// again then).
func live(t *testing.T, sw *stepWaiters, chans ...<-chan struct{}) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, "the feed to subscribe", sw.fed.Load)
	for _, ch := range chans {
		select {
		case <-ch:
		default:
		}
	}
}

// The event feed wakes a step's waiter on its step's commit, published by
// anyone on the bus, and not on the step's other events; when the
// connection drops and when it comes back it wakes every waiter (events
// published in between are lost) and lets them poll fast while it is down.
func TestEventFeedWakesWaiters(t *testing.T) {
	b, srv, nc := bustest.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	sw := startFeed(t, b)

	woken := func(ch <-chan struct{}, within time.Duration) bool {
		t.Helper()
		select {
		case <-ch:
			return true
		case <-time.After(within):
			return false
		}
	}
	ch, done := sw.wait("run_a", "run_a/0")
	defer done()
	other, doneOther := sw.wait("run_b", "run_b/0")
	defer doneOther()
	live(t, sw, ch, other)

	publish := func(runID, stepID, typ string) {
		t.Helper()
		if err := b.PublishEvent(ctx, bus.Event{RunID: runID, StepID: stepID, Type: typ}); err != nil {
			t.Fatal(err)
		}
		if err := b.FlushEvents(ctx); err != nil {
			t.Fatal(err)
		}
	}
	publish("run_a", "run_a/0", bus.EventStepStarted)
	if woken(ch, 300*time.Millisecond) {
		t.Fatal("woken by step.started: the feed wants only ends")
	}
	publish("run_a", "run_a/0", bus.EventStepCommitted)
	if !woken(ch, 10*time.Second) {
		t.Fatal("not woken within 10 s of the step's commit")
	}
	if woken(other, 300*time.Millisecond) {
		t.Fatal("another run's waiter woken by run_a's commit")
	}

	opts := srv.Options()
	srv.Shutdown()
	testenv.Eventually(t, 10*time.Second, "the feed to see the connection down", func() bool { return !sw.fed.Load() })
	if !woken(ch, 5*time.Second) || !woken(other, 5*time.Second) {
		t.Fatal("waiters not woken when the connection dropped")
	}
	srv2, err := embedded.Start(ctx, opts)
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	t.Cleanup(srv2.Shutdown)
	testenv.Eventually(t, 15*time.Second, "the feed to be up again", func() bool { return nc.IsConnected() && sw.fed.Load() })
	if !woken(ch, 5*time.Second) || !woken(other, 5*time.Second) {
		t.Fatal("waiters not woken when the connection came back")
	}
	publish("run_b", "run_b/0", bus.EventStepFailed)
	if !woken(other, 10*time.Second) {
		t.Fatal("not woken by a step failure after the reconnect")
	}
}

// blipBus is the real bus whose reconnect count the test moves: a
// reconnect quicker than the feed's look at the connection.
type blipBus struct {
	*bus.Bus
	reconnects atomic.Uint64
}

func (b *blipBus) Reconnects() uint64 { return b.reconnects.Load() }

// A reconnect the feed never saw down (the count moved, the connection is
// up at every look) still wakes every waiter: events may have been lost
// in between.
func TestEventFeedWakesOnQuickReconnect(t *testing.T) {
	real, _, _ := bustest.New(t)
	b := &blipBus{Bus: real}
	sw := startFeed(t, b)
	ch, done := sw.wait("run_q", "run_q/0")
	defer done()
	live(t, sw, ch)
	b.reconnects.Add(1)
	select {
	case <-ch:
	case <-time.After(5 * feedCheck):
		t.Fatalf("not woken within %s of a reconnect", 5*feedCheck)
	}
	if !sw.fed.Load() {
		t.Fatal("the feed is not live after a quick reconnect")
	}
}

// subsBus is the real bus that counts the event subscriptions it has
// open.
type subsBus struct {
	*bus.Bus
	open atomic.Int64
}

func (b *subsBus) SubscribeEvents(ctx context.Context, fn func(bus.LiveEvent), types ...string) (func(), error) {
	stop, err := b.Bus.SubscribeEvents(ctx, fn, types...)
	if err != nil {
		return nil, err
	}
	b.open.Add(1)
	var once sync.Once
	return func() { once.Do(func() { b.open.Add(-1); stop() }) }, nil
}

// The feed is subscribed only while someone waits, and Linger after: a
// coordinator whose runs nobody waits on is sent none of their events. A
// first waiter is served at once (it is woken when the subscription is
// live, to read its step again) and then by the events; the subscription
// ends Linger after the last waiter left and comes back for the next.
func TestEventFeedSubscribesOnlyWhileWaited(t *testing.T) {
	real, _, _ := bustest.New(t)
	b := &subsBus{Bus: real}
	sw := &stepWaiters{}
	f := &EventFeed{bus: b, waiters: sw, log: slog.New(slog.DiscardHandler), Linger: 200 * time.Millisecond}
	if err := f.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)

	// Nobody waits: no subscription, for several looks at the connection.
	deadline := time.After(3 * feedCheck)
	for idle := true; idle; {
		select {
		case <-deadline:
			idle = false
		case <-time.After(50 * time.Millisecond):
			if n := b.open.Load(); n != 0 || sw.fed.Load() {
				t.Fatalf("%d event subscriptions (fed %v) with nobody waiting", n, sw.fed.Load())
			}
		}
	}

	for round := range 2 {
		ch, done := sw.wait("run_w", "run_w/0")
		select {
		case <-ch:
		case <-time.After(feedCheck / 2):
			t.Fatalf("round %d: the first waiter was not woken within %s (the feed subscribes at once, not at its next look)", round, feedCheck/2)
		}
		if n := b.open.Load(); n != 1 || !sw.fed.Load() {
			t.Fatalf("round %d: %d subscriptions (fed %v) with a waiter, want 1 and live", round, n, sw.fed.Load())
		}
		if err := real.PublishEvent(t.Context(), bus.Event{RunID: "run_w", StepID: "run_w/0", Type: bus.EventStepCommitted}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: not woken by the step's commit", round)
		}
		done()
		testenv.Eventually(t, 10*time.Second, "the feed to unsubscribe after Linger", func() bool {
			return b.open.Load() == 0 && !sw.fed.Load()
		})
	}
}
