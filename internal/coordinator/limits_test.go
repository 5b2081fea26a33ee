package coordinator

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

func TestStreamLimiter(t *testing.T) {
	t.Parallel()
	l := newStreamLimiter(2, 3)
	take := func(tenant, token string) func() {
		t.Helper()
		release, err := l.acquire(tenant, token)
		if err != nil {
			t.Fatalf("acquire %s/%s: %v", tenant, token, err)
		}
		return release
	}
	refused := func(tenant, token, want string) {
		t.Helper()
		_, err := l.acquire(tenant, token)
		if !errors.Is(err, ErrTooManyStreams) || !strings.Contains(err.Error(), want) {
			t.Fatalf("acquire %s/%s past the cap: %v; want ErrTooManyStreams naming %q", tenant, token, err, want)
		}
	}
	r1 := take("umbrella", "t1")
	take("umbrella", "t1")
	refused("umbrella", "t1", "per token")
	take("umbrella", "t2")
	refused("umbrella", "t2", "per tenant")
	refused("umbrella", "t3", "per tenant")
	// Without authentication there is no token to count: only the tenant cap.
	take("default", "")
	take("default", "")
	take("default", "")
	refused("default", "", "per tenant")
	// Another tenant is not held to umbrella's count.
	take("acme", "a1")
	take("acme", "a1")
	// A release frees the slot once, however often it is called.
	r1()
	r1()
	take("umbrella", "t1")
	refused("umbrella", "t2", "per tenant")
	if l.tokens["t1"] != 2 || l.tenants["umbrella"] != 3 {
		t.Fatalf("counts after a double release: token t1 %d, tenant umbrella %d; want 2 and 3", l.tokens["t1"], l.tenants["umbrella"])
	}
}

// Concurrent acquires never exceed the cap, and releases return every
// count to zero (the maps forget idle tokens and tenants).
func TestStreamLimiterConcurrent(t *testing.T) {
	t.Parallel()
	l := newStreamLimiter(5, 1000)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var got []func()
	for range 50 {
		wg.Go(func() {
			if release, err := l.acquire("acme", "tok"); err == nil {
				mu.Lock()
				got = append(got, release)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(got) != 5 {
		t.Fatalf("%d of 50 concurrent acquires succeeded, want 5", len(got))
	}
	for _, release := range got {
		release()
	}
	if len(l.tokens) != 0 || len(l.tenants) != 0 {
		t.Fatalf("after every release: tokens %v, tenants %v; want empty", l.tokens, l.tenants)
	}
}

func TestTooManyStreamsResponse(t *testing.T) {
	t.Parallel()
	w := httptest.NewRecorder()
	tooManyStreams(w, ErrTooManyStreams)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "5" || !strings.Contains(w.Body.String(), "too_many_requests") {
		t.Fatalf("429 response: %d, Retry-After %q, body %s", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
}
