package coordinator

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Defaults of the event stream caps (Config.EventStreamsPerToken and
// Config.EventStreamsPerTenant). The tenant default stays well under the
// 1,000 consumers NATS allows a stream by default, so one tenant cannot
// fill the events stream.
const (
	DefaultEventStreamsPerToken  = 8
	DefaultEventStreamsPerTenant = 100
)

// eventStreamRetry is the Retry-After of a refused event stream: a slot
// frees when one of the caller's own streams ends, which it controls.
const eventStreamRetry = 5 * time.Second

// ErrTooManyStreams marks a stream refused because its token or tenant
// already holds as many as the coordinator allows (HTTP 429).
var ErrTooManyStreams = errors.New("too many event streams")

// streamLimiter counts the live event streams (each one a JetStream
// consumer) of every token and tenant on this replica and refuses one
// past either cap. It is safe for concurrent use; the zero value is not
// (use newStreamLimiter).
type streamLimiter struct {
	perToken, perTenant int

	mu      sync.Mutex     // guards following
	tokens  map[string]int // live streams by token id
	tenants map[string]int // live streams by tenant
}

func newStreamLimiter(perToken, perTenant int) *streamLimiter {
	return &streamLimiter{perToken: perToken, perTenant: perTenant, tokens: map[string]int{}, tenants: map[string]int{}}
}

// acquire takes a stream slot for token of tenant, or returns an error
// wrapping ErrTooManyStreams that names the cap. An empty token (the API's
// authentication is off) is held only to the tenant's cap: every client
// would share it. release gives the slot back; it may be called more than
// once.
func (l *streamLimiter) acquire(tenant, token string) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := l.tokens[token]; token != "" && n >= l.perToken {
		return nil, fmt.Errorf("%w: this token holds %d live event streams, the most allowed per token; close one first", ErrTooManyStreams, n)
	}
	if n := l.tenants[tenant]; n >= l.perTenant {
		return nil, fmt.Errorf("%w: tenant %q holds %d live event streams, the most allowed per tenant; close one first", ErrTooManyStreams, tenant, n)
	}
	l.tokens[token]++
	l.tenants[tenant]++
	var once sync.Once
	return func() { once.Do(func() { l.release(tenant, token) }) }, nil
}

func (l *streamLimiter) release(tenant, token string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tokens[token]--; l.tokens[token] <= 0 {
		delete(l.tokens, token)
	}
	if l.tenants[tenant]--; l.tenants[tenant] <= 0 {
		delete(l.tenants, tenant)
	}
}

// tooManyStreams answers a refused stream: 429, the reason and when to
// retry.
func tooManyStreams(w http.ResponseWriter, err error) {
	w.Header().Set("Retry-After", strconv.Itoa(int(eventStreamRetry/time.Second)))
	writeError(w, http.StatusTooManyRequests, "too_many_requests", err.Error())
}

// holdConn lets a request that has been authenticated and bounded by its
// handler (an event stream, a ?wait= long poll, an import or export) keep
// its connection past the server's read and write timeouts
// (http.Server.ReadTimeout and WriteTimeout, which close slow clients):
// both deadlines move to d from now, or are removed when d is 0. The read
// deadline matters while a body is still to be read (an import, a PUT);
// net/http clears it once the body is consumed. Servers that cannot set
// deadlines (httptest recorders) are left alone.
func holdConn(w http.ResponseWriter, d time.Duration) {
	var deadline time.Time
	if d > 0 {
		deadline = time.Now().Add(d)
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(deadline)
	_ = rc.SetWriteDeadline(deadline)
}

// streamWriteWindow is how long one write of an event stream may take: a
// client that reads nothing for this long loses its stream.
const streamWriteWindow = 30 * time.Second

// holdSlack is added to a long poll's wait for the rest of its request.
const holdSlack = 30 * time.Second

// transferWindow bounds a session import (a body of up to MaxImportBytes)
// or export, past the server's read and write timeouts.
const transferWindow = 10 * time.Minute
