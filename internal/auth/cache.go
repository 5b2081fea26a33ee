package auth

import (
	"context"
	"sync"
	"time"
)

// maxCached bounds the tokens a [Cache] remembers. Only tokens the store
// verified are kept, so the bound is reached only by that many live tokens
// in use within one TTL; past it the cache starts over.
const maxCached = 10_000

// lookup is what a [Cache] asks on a miss: the principal of a token of
// the right shape, given by its hash, and when the token expires (nil:
// never). *Store is one.
type lookup interface {
	verify(ctx context.Context, hash string) (Principal, *time.Time, error)
}

// Cache is a [Verifier] that remembers the tokens the store verified, for
// at most TTL each, so that a client's requests do not each cost the
// store a query. It keeps what it needs to answer without the store:
// a token's principal and its expiry, keyed by the token's hash (never the
// token).
//
// What it promises:
//   - An expired token is refused at its expiry, cached or not.
//   - A token revoked through this cache ([Cache.Forget], which the
//     coordinator's revoke endpoint calls) is refused on the next request,
//     including when a lookup that started before the revocation returns
//     after it.
//   - A token revoked elsewhere (another coordinator, rathctl token revoke
//     --store, SQL) is refused within TTL.
//   - While suspended ([Cache.Suspend]: its owner cannot hear the other
//     coordinators' revocations) it remembers nothing and every request
//     asks the store, until [Cache.Resume].
//
// An unknown, revoked or expired token is never cached: each such request
// asks the store. It is safe for concurrent use.
type Cache struct {
	store lookup
	ttl   time.Duration
	now   func() time.Time
	// answered, when set, is told of every token the cache answered for
	// or asked the store about.
	answered func(fromCache bool)

	mu sync.Mutex
	// gen counts Forget, Suspend and Resume calls: a lookup stores its
	// answer only if none happened while it ran.
	gen    uint64
	byHash map[string]cached
	// suspended: nothing is stored in byHash, which Suspend emptied, so
	// every lookup misses.
	suspended bool
}

type cached struct {
	p     Principal
	until time.Time // the earlier of the lookup's time + TTL and the expiry
}

// NewCache returns a cache in front of s that trusts a verified token for
// ttl (positive). answered, when not nil, is called for each token of the
// right shape presented: with true when the cache answered, false when the
// store was asked (refusals included); it must not block.
func NewCache(s *Store, ttl time.Duration, answered func(fromCache bool)) *Cache {
	c := newCache(s, ttl, time.Now)
	c.answered = answered
	return c
}

func newCache(s lookup, ttl time.Duration, now func() time.Time) *Cache {
	return &Cache{store: s, ttl: ttl, now: now, byHash: make(map[string]cached)}
}

// Authenticate returns the principal of a presented token from the cache,
// or from the store (see [Store.Authenticate]) when it is not cached or its
// time is up.
func (c *Cache) Authenticate(ctx context.Context, token string) (Principal, error) {
	if !LooksLikeToken(token) {
		return Principal{}, ErrUnauthenticated
	}
	hash := HashToken(token)
	c.mu.Lock()
	e, ok := c.byHash[hash]
	gen := c.gen
	c.mu.Unlock()
	if ok && c.now().Before(e.until) {
		c.tell(true)
		return e.p, nil
	}
	c.tell(false)
	asked := c.now()
	p, expires, err := c.store.verify(ctx, hash)
	if err != nil {
		return Principal{}, err
	}
	until := asked.Add(c.ttl)
	if expires != nil && expires.Before(until) {
		until = *expires
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen || c.suspended {
		// A revocation may have happened after the store answered, or
		// gone unheard.
		return p, nil
	}
	if len(c.byHash) >= maxCached {
		c.sweep()
	}
	c.byHash[hash] = cached{p: p, until: until}
	return p, nil
}

func (c *Cache) tell(fromCache bool) {
	if c.answered != nil {
		c.answered(fromCache)
	}
}

// sweep drops the entries whose time is up, and every entry if that
// leaves the cache full. c.mu is held.
func (c *Cache) sweep() {
	now := c.now()
	for h, e := range c.byHash {
		if !now.Before(e.until) {
			delete(c.byHash, h)
		}
	}
	if len(c.byHash) >= maxCached {
		clear(c.byHash)
	}
}

// Forget drops the token with id from the cache and makes lookups in
// flight not store their answers: call it once the store has revoked the
// token.
func (c *Cache) Forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for h, e := range c.byHash {
		if e.p.TokenID == id {
			delete(c.byHash, h)
		}
	}
}

// Suspend drops every cached token and stops caching until [Cache.Resume]:
// call it when revocations made elsewhere can no longer reach [Cache.Forget]
// (the coordinator's NATS connection is down), so that a token revoked
// meanwhile is not trusted for the rest of its TTL. Lookups in flight do
// not store their answers.
func (c *Cache) Suspend() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.suspended = true
	clear(c.byHash)
}

// Resume caches verified tokens again after [Cache.Suspend]: call it once
// revocations reach Forget again. A lookup that started before it does not
// store its answer (the store may have answered before a revocation that
// went unheard).
func (c *Cache) Resume() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.suspended = false
}
