package bus

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// TokenRevokedSubject is the core-NATS subject on which a coordinator
// announces the id of an API token it has revoked, so that the other
// coordinators drop the token from their caches (internal/auth.Cache)
// rather than trust it until their TTL is up. No stream stores it.
const TokenRevokedSubject = "rath.tokens.revoked"

// maxTokenIDLen bounds what a revocation announcement may carry: a token
// id is "tok_" and 16 hex digits.
const maxTokenIDLen = 64

// PublishTokenRevoked announces that the token with id was revoked. It is
// best effort, like any core-NATS publish: a coordinator whose connection
// is down does not hear it, and trusts the token until its cache's TTL.
func (b *Bus) PublishTokenRevoked(id string) error {
	if id == "" || len(id) > maxTokenIDLen {
		return fmt.Errorf("%w: token id %q: want 1..%d bytes", ErrInvalidEvent, id, maxTokenIDLen)
	}
	if err := b.nc.Publish(TokenRevokedSubject, []byte(id)); err != nil {
		return fmt.Errorf("announce token revocation: %w", translate(context.Background(), err))
	}
	return nil
}

// SubscribeTokenRevocations calls fn with the id of every token a
// coordinator announces revoked from now on (see [Bus.PublishTokenRevoked]),
// through a core-NATS subscription. Announcements that are empty or too
// long to be a token id are dropped. fn runs on the subscription's
// goroutine and must not block.
//
// hearing (when not nil) says whether announcements reach fn. It is called
// with true once the subscription is live on the server (before
// SubscribeTokenRevocations returns), with false as soon as the connection
// is lost (announcements sent meanwhile are lost with it), and with true
// again once the connection is back and the server has processed the
// subscription anew. Every reconnection is reported as false then true,
// even if the loss went unreported. Calls come from one goroutine, in
// order, and must not block for long.
//
// stop unsubscribes and waits for the last call to hearing to return.
func (b *Bus) SubscribeTokenRevocations(fn func(id string), hearing func(bool)) (stop func(), err error) {
	if fn == nil {
		return nil, fmt.Errorf("%w: nil token revocation handler", ErrInvalidConfig)
	}
	if hearing == nil {
		hearing = func(bool) {}
	}
	// Listen before subscribing, so no change of the connection's state
	// after the subscription went live is missed.
	statuses := b.nc.StatusChanged(nats.CONNECTED, nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED)
	unsub, err := b.subscribe(context.Background(), "token revocations", []string{TokenRevokedSubject}, func(m *nats.Msg) {
		if len(m.Data) == 0 || len(m.Data) > maxTokenIDLen {
			return
		}
		fn(string(m.Data))
	})
	if err != nil {
		b.nc.RemoveStatusListener(statuses)
		return nil, err
	}
	hearing(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.followHearing(ctx, statuses, hearing)
	}()
	return sync.OnceFunc(func() {
		cancel()
		b.nc.RemoveStatusListener(statuses)
		<-done
		unsub()
	}), nil
}

// hearingRetry is how long followHearing waits before it asks the server
// again whether it has the subscription, after a flush failed while the
// connection was up.
const hearingRetry = time.Second

// followHearing reports to hearing what the connection's statuses mean for
// a core subscription: lost on any loss of the connection, live again
// once, after a reconnection, a flush has come back (nats.go resends the
// subscriptions before anything queued after the reconnection, so the
// server has processed them by then). It returns when statuses is closed
// or ctx ends.
func (b *Bus) followHearing(ctx context.Context, statuses <-chan nats.Status, hearing func(bool)) {
	heard := true
	set := func(h bool) {
		if h != heard {
			heard = h
			hearing(h)
		}
	}
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case st, ok := <-statuses:
			if !ok {
				return
			}
			// A reconnection may follow a loss whose status was dropped
			// (the channel keeps ten): every status first means lost.
			set(false)
			retry = nil
			if st != nats.CONNECTED {
				continue
			}
		case <-retry:
			retry = nil
			if !b.nc.IsConnected() {
				continue
			}
		}
		if err := b.flush(ctx); err != nil {
			retry = time.After(hearingRetry)
			continue
		}
		set(true)
	}
}
