package coordinator

import (
	"context"
	"log/slog"
	"time"

	"github.com/rath-run/rath/internal/service"
)

// tokenRevocations is the service that keeps the coordinator's token cache
// in step with the other coordinators': it drops the tokens they announce
// revoked ([bus.Bus.SubscribeTokenRevocations]), so that a token revoked
// through one replica is refused by every replica within a network round
// trip rather than within the cache's TTL. Announcements are best effort:
// one sent while this replica's NATS connection is down is lost, so the
// cache is suspended (emptied, every request asking the store) from the
// moment the connection is lost until the subscription is live again, and
// until the service first subscribes (New suspends it). Without a token
// cache, or on a bus that cannot subscribe, it does nothing.
type tokenRevocations struct {
	service.Base
	c *Coordinator
}

// revocationBus is a bus that carries token revocations (the real bus).
type revocationBus interface {
	PublishTokenRevoked(id string) error
	SubscribeTokenRevocations(fn func(id string), hearing func(bool)) (stop func(), err error)
}

// revocationRetry is how long the service waits to subscribe again after
// a failure.
const revocationRetry = time.Second

// Start implements [service.Service].
func (r *tokenRevocations) Start(ctx context.Context) error {
	return r.Go(ctx, r.run)
}

func (r *tokenRevocations) run(ctx context.Context) {
	rb, ok := r.c.bus.(revocationBus)
	if !ok || r.c.tokenCache == nil {
		return
	}
	for {
		stop, err := rb.SubscribeTokenRevocations(r.c.tokenCache.Forget, r.hearing)
		if err == nil {
			<-ctx.Done()
			stop()
			return
		}
		r.c.log.WarnContext(ctx, "token revocations: subscribe failed; the token cache stays suspended, every request asks the store", slog.Any("error", err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(revocationRetry):
		}
	}
}

// hearing suspends the token cache while revocations cannot reach it and
// resumes it once they can.
func (r *tokenRevocations) hearing(ok bool) {
	r.c.tokenCacheHears(ok)
	if ok {
		r.c.log.Info("token revocations: listening; the token cache serves")
		return
	}
	r.c.log.Warn("token revocations: NATS connection lost; the token cache is suspended, every request asks the store until it is back")
}

// tokenCacheHears resumes the token cache when revocations reach it (ok)
// and suspends it when they cannot, and says which on /metrics.
func (c *Coordinator) tokenCacheHears(ok bool) {
	if ok {
		c.tokenCache.Resume()
	} else {
		c.tokenCache.Suspend()
	}
	c.cfg.Metrics.TokenCacheSuspend(!ok)
}

// tokenRevoked drops a token this coordinator revoked from its cache, and
// announces it to the other coordinators, whose caches may hold it
// whether or not this one has a cache.
func (c *Coordinator) tokenRevoked(ctx context.Context, id string) {
	if c.tokenCache != nil {
		// Refused from the next request on, not when the cache's time is up.
		c.tokenCache.Forget(id)
	}
	if rb, ok := c.bus.(revocationBus); ok {
		if err := rb.PublishTokenRevoked(id); err != nil {
			c.log.WarnContext(ctx, "announce token revocation (other replicas refuse it within the token cache's TTL)", slog.String("token", id), slog.Any("error", err))
		}
	}
}
