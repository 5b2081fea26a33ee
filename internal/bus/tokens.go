package bus

import (
	"context"
	"fmt"

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
// goroutine and must not block. stop unsubscribes.
func (b *Bus) SubscribeTokenRevocations(fn func(id string)) (stop func(), err error) {
	if fn == nil {
		return nil, fmt.Errorf("%w: nil token revocation handler", ErrInvalidConfig)
	}
	return b.subscribe(context.Background(), "token revocations", []string{TokenRevokedSubject}, func(m *nats.Msg) {
		if len(m.Data) == 0 || len(m.Data) > maxTokenIDLen {
			return
		}
		fn(string(m.Data))
	})
}
