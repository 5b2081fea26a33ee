package auth

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// fakeTokens is a token store in memory whose lookups a test can count
// and hold.
type fakeTokens struct {
	mu      sync.Mutex
	live    map[string]Principal  // by token
	expires map[string]*time.Time // by token
	byHash  map[string]string     // token by hash, filled on first use
	calls   int
	// hold, when set, is received from before a lookup answers (read
	// before the lookup reads the store, answered after).
	hold chan chan struct{}
}

func (f *fakeTokens) verify(_ context.Context, hash string) (Principal, *time.Time, error) {
	f.mu.Lock()
	if f.byHash == nil {
		f.byHash = make(map[string]string, len(f.live))
		for tok := range f.live {
			f.byHash[HashToken(tok)] = tok
		}
	}
	token := f.byHash[hash]
	p, ok := f.live[token]
	exp := f.expires[token]
	f.calls++
	hold := f.hold
	f.mu.Unlock()
	if hold != nil {
		release := make(chan struct{})
		hold <- release
		<-release
	}
	if !ok {
		return Principal{}, nil, ErrUnauthenticated
	}
	return p, exp, nil
}

func (f *fakeTokens) revoke(token string) {
	f.mu.Lock()
	delete(f.live, token)
	f.mu.Unlock()
}

func (f *fakeTokens) lookups() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// clock is a test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newToken(t *testing.T) string {
	t.Helper()
	tok, _, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestCacheAsksOncePerTTL: repeated requests with a live token ask the
// store once per TTL; its time up, the store is asked again and a token
// revoked there meanwhile is refused.
func TestCacheAsksOncePerTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tok := newToken(t)
	f := &fakeTokens{live: map[string]Principal{tok: {TokenID: "tok_a", Tenant: "acme", Scope: ScopeSubmit}}}
	clk := &clock{t: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	c := newCache(f, time.Second, clk.now)
	for range 100 {
		p, err := c.Authenticate(ctx, tok)
		if err != nil || p.TokenID != "tok_a" || p.Tenant != "acme" || p.Scope != ScopeSubmit {
			t.Fatalf("Authenticate = %+v, %v", p, err)
		}
	}
	if n := f.lookups(); n != 1 {
		t.Fatalf("100 requests asked the store %d times, want 1", n)
	}
	f.revoke(tok) // elsewhere: the cache is not told
	clk.add(999 * time.Millisecond)
	if _, err := c.Authenticate(ctx, tok); err != nil {
		t.Fatalf("within the TTL: %v", err)
	}
	clk.add(time.Millisecond)
	if _, err := c.Authenticate(ctx, tok); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("at the TTL, revoked in the store: %v, want ErrUnauthenticated", err)
	}
	if _, err := c.Authenticate(ctx, tok); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("a refused token was cached: %v", err)
	}
	if n := f.lookups(); n != 3 {
		t.Fatalf("store asked %d times, want 3 (refusals are not cached)", n)
	}
	if _, err := c.Authenticate(ctx, "not-a-token"); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("malformed token: %v", err)
	}
	if n := f.lookups(); n != 3 {
		t.Fatalf("a malformed token reached the store")
	}
}

// TestCacheRefusesAtExpiry: a cached token is refused the moment it
// expires, though the TTL would have kept it.
func TestCacheRefusesAtExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tok := newToken(t)
	clk := &clock{t: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	exp := clk.now().Add(10 * time.Millisecond)
	f := &fakeTokens{live: map[string]Principal{tok: {TokenID: "tok_a", Scope: ScopeRead}},
		expires: map[string]*time.Time{tok: &exp}}
	c := newCache(f, time.Minute, clk.now)
	if _, err := c.Authenticate(ctx, tok); err != nil {
		t.Fatal(err)
	}
	clk.add(9 * time.Millisecond)
	if _, err := c.Authenticate(ctx, tok); err != nil {
		t.Fatalf("before expiry: %v", err)
	}
	if n := f.lookups(); n != 1 {
		t.Fatalf("store asked %d times before expiry, want 1", n)
	}
	clk.add(time.Millisecond)
	// The fake store does not expire tokens itself: a refusal can only
	// come from the cache not answering, and the store is asked again.
	f.revoke(tok)
	if _, err := c.Authenticate(ctx, tok); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("at expiry: %v, want ErrUnauthenticated", err)
	}
	if n := f.lookups(); n != 2 {
		t.Fatalf("store asked %d times, want 2 (the cache let go at expiry)", n)
	}
}

// TestCacheForgetWinsOverALookupInFlight: a lookup that read the token
// live before its revocation, and answers after Forget, does not put the
// token back in the cache: the next request asks the store and is refused.
func TestCacheForgetWinsOverALookupInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tok := newToken(t)
	f := &fakeTokens{live: map[string]Principal{tok: {TokenID: "tok_a", Scope: ScopeAdmin}},
		hold: make(chan chan struct{})}
	c := newCache(f, time.Hour, time.Now)
	done := make(chan error, 1)
	go func() {
		_, err := c.Authenticate(ctx, tok)
		done <- err
	}()
	release := <-f.hold // the lookup has read the token live
	f.mu.Lock()
	f.hold = nil
	f.mu.Unlock()
	f.revoke(tok)
	c.Forget("tok_a")
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the request in flight: %v (it raced the revocation and may pass)", err)
	}
	if _, err := c.Authenticate(ctx, tok); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("after Forget: %v, want ErrUnauthenticated", err)
	}
}

// TestCacheForgetDropsTheToken: Forget refuses a cached token on the next
// request, other tokens stay cached.
func TestCacheForgetDropsTheToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := newToken(t), newToken(t)
	f := &fakeTokens{live: map[string]Principal{a: {TokenID: "tok_a", Scope: ScopeRead}, b: {TokenID: "tok_b", Scope: ScopeRead}}}
	c := newCache(f, time.Hour, time.Now)
	for _, tok := range []string{a, b} {
		if _, err := c.Authenticate(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	f.revoke(a)
	c.Forget("tok_a")
	if _, err := c.Authenticate(ctx, a); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("forgotten and revoked: %v", err)
	}
	if _, err := c.Authenticate(ctx, b); err != nil {
		t.Fatalf("the other token: %v", err)
	}
	if n := f.lookups(); n != 3 {
		t.Fatalf("store asked %d times, want 3 (b stayed cached)", n)
	}
}

// TestCacheBounded: past maxCached live tokens the cache starts over
// rather than grow.
func TestCacheBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := &fakeTokens{live: map[string]Principal{}}
	toks := make([]string, maxCached+1)
	for i := range toks {
		toks[i] = newToken(t)
		f.live[toks[i]] = Principal{TokenID: "tok", Scope: ScopeRead}
	}
	c := newCache(f, time.Hour, time.Now)
	for _, tok := range toks {
		if _, err := c.Authenticate(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	c.mu.Lock()
	n := len(c.byHash)
	c.mu.Unlock()
	if n > maxCached {
		t.Fatalf("cache holds %d tokens, bound %d", n, maxCached)
	}
}

// TestCacheSuspendedAsksEveryTime: Suspend drops what the cache holds, so a
// token revoked while its owner could not hear revocations is refused on
// the next request; suspended, every request asks the store; a lookup that
// started before Resume does not store its answer; after Resume the cache
// serves again.
func TestCacheSuspendedAsksEveryTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tok := newToken(t)
	f := &fakeTokens{live: map[string]Principal{tok: {TokenID: "tok_a", Scope: ScopeRead}}}
	c := newCache(f, time.Hour, time.Now)
	for range 3 {
		if _, err := c.Authenticate(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.lookups(); n != 1 {
		t.Fatalf("store asked %d times before Suspend, want 1", n)
	}
	c.Suspend()
	for range 3 {
		if _, err := c.Authenticate(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.lookups(); n != 4 {
		t.Fatalf("store asked %d times, want 4: suspended, every request asks", n)
	}
	f.revoke(tok) // unheard: no Forget
	if _, err := c.Authenticate(ctx, tok); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("revoked while suspended: %v, want ErrUnauthenticated", err)
	}

	// A lookup in flight across Resume does not store its answer.
	other := newToken(t)
	f.mu.Lock()
	f.live[other] = Principal{TokenID: "tok_b", Scope: ScopeRead}
	f.byHash = nil
	f.hold = make(chan chan struct{})
	f.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		_, err := c.Authenticate(ctx, other)
		done <- err
	}()
	release := <-f.hold
	f.mu.Lock()
	f.hold = nil
	f.mu.Unlock()
	c.Resume()
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	before := f.lookups()
	for range 3 {
		if _, err := c.Authenticate(ctx, other); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.lookups() - before; n != 1 {
		t.Fatalf("after Resume the store was asked %d times for three requests, want 1 (the lookup that straddled Resume stored nothing; the next one did)", n)
	}
}
