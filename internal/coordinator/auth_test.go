package coordinator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/auth"
	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/coordinator"
	"github.com/rath-run/rath/internal/telemetry"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/store/sqlitestore"
)

const bootstrap = "bootstrap-secret-for-tests"

// authStack is a dev stack (store, bus, workers) with a coordinator that
// requires authentication, served by an httptest server.
type authStack struct {
	dev    *app.Dev
	coord  *coordinator.Coordinator
	tokens *auth.Store
	url    string
	cfg    coordinator.Config
}

func newAuthStack(t *testing.T, backend string, workers int) *authStack {
	t.Helper()
	return newAuthStackWith(t, backend, workers, nil)
}

// newAuthStackWith is newAuthStack with set changing the coordinator's
// configuration first (when not nil).
func newAuthStackWith(t *testing.T, backend string, workers int, set func(*coordinator.Config)) *authStack {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	url := "sqlite:" + filepath.Join(dir, "rath.db")
	if backend == "postgres" {
		url = testdb.Postgres(t)
	}
	d, err := app.StartDev(ctx, app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", Workers: workers, StoreURL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	tokens, err := d.Backend.TokenStore()
	if err != nil {
		t.Fatal(err)
	}
	cfg := coordinator.Config{Token: bootstrap, Tokens: tokens, SameDatabase: d.Backend.SubmitInOneTx()}
	pools, err := app.TenantPools(url)
	if err != nil {
		t.Fatal(err)
	}
	if pools != nil {
		t.Cleanup(func() { _ = pools.Close() })
		cfg.Tenants = pools
	}
	if set != nil {
		set(&cfg)
	}
	return serveCoordinator(t, d, d.Backend.Bus, tokens, cfg, false)
}

// serveCoordinator starts a coordinator over d's store and bus b with cfg,
// behind an httptest server; with services, its background services
// (event feed, workflow driver, reconciler, token revocations) run too.
func serveCoordinator(t *testing.T, d *app.Dev, b coordinator.Bus, tokens *auth.Store, cfg coordinator.Config, services bool) *authStack {
	t.Helper()
	c, err := coordinator.New(d.Backend.Store, d.Backend.Runs, b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if services {
		svc := c.Services()
		if err := svc.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(svc.Stop)
	}
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	return &authStack{dev: d, coord: c, tokens: tokens, url: srv.URL, cfg: cfg}
}

// replica returns a second coordinator over s's store and bus, with s's
// configuration changed by set (when not nil) and its services running,
// as a second replica of a deployment.
func (s *authStack) replica(t *testing.T, set func(*coordinator.Config)) *authStack {
	t.Helper()
	cfg := s.cfg
	if set != nil {
		set(&cfg)
	}
	return serveCoordinator(t, s.dev, s.dev.Backend.Bus, s.tokens, cfg, true)
}

// call sends a request with token (none when "") and returns the status
// and body.
func (s *authStack) call(t *testing.T, token, method, path, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, b
}

// mustCall is call that fails the test on an unexpected status, and decodes
// the JSON body into v (when not nil).
func (s *authStack) mustCall(t *testing.T, want int, token, method, path, body string, v any) {
	t.Helper()
	got, b := s.call(t, token, method, path, body)
	if got != want {
		t.Fatalf("%s %s = %d %s, want %d", method, path, got, b, want)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}

// mint creates a token through the API as the bootstrap admin.
func (s *authStack) mint(t *testing.T, scope auth.Scope, tenant string) api.CreatedToken {
	t.Helper()
	body, _ := json.Marshal(api.CreateTokenRequest{Name: string(scope) + "@" + tenant, Tenant: tenant, Scope: api.Scope(scope)})
	var tok api.CreatedToken
	s.mustCall(t, http.StatusCreated, bootstrap, "POST", "/v1/tokens", string(body), &tok)
	if !auth.LooksLikeToken(tok.Secret) || tok.Tenant != tenant || tok.Scope != api.Scope(scope) {
		t.Fatalf("minted %+v", tok.Token)
	}
	return tok
}

// TestEveryRouteHasAScope walks the /v1 mux: every registered route has a
// scope in RouteScopes, and every RouteScopes entry is a registered route.
func TestEveryRouteHasAScope(t *testing.T) {
	t.Parallel()
	s := newAuthStack(t, "sqlite", -1)
	routes := s.coord.Routes()
	if len(routes) == 0 {
		t.Fatal("no routes recorded")
	}
	for _, r := range routes {
		if _, ok := coordinator.RouteScopes[r]; !ok {
			t.Errorf("route %q has no scope in coordinator.RouteScopes", r)
		}
	}
	for r, sc := range coordinator.RouteScopes {
		if !slices.Contains(routes, r) {
			t.Errorf("RouteScopes lists %q (%s), which is not a route", r, sc)
		}
		if !sc.Valid() {
			t.Errorf("route %q has invalid scope %q", r, sc)
		}
		if strings.HasPrefix(r, "GET ") && sc != auth.ScopeRead && !strings.Contains(r, "/tokens") {
			t.Errorf("GET route %q needs %s; reads should need read", r, sc)
		}
	}
}

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// TestAuthRefusals tries the API from the attacker's side: no token, bad
// tokens, revoked and expired tokens, a read token writing, a submit token
// minting tokens. Each is refused with the right status and a JSON error,
// and nothing is written.
func TestAuthRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newAuthStack(t, "sqlite", -1)
	read := s.mint(t, auth.ScopeRead, "default")
	submit := s.mint(t, auth.ScopeSubmit, "default")
	revoked := s.mint(t, auth.ScopeAdmin, "default")
	s.mustCall(t, http.StatusOK, bootstrap, "POST", "/v1/tokens/"+revoked.ID+"/revoke", "", nil)
	expired := s.mint(t, auth.ScopeAdmin, "default")
	db := s.dev.Backend.Store.(*sqlitestore.Store).DB()
	if _, err := db.ExecContext(ctx, `UPDATE api_tokens SET expires_at = $2 WHERE id = $1`, expired.ID, time.Now().Add(-time.Minute).UTC()); err != nil {
		t.Fatal(err)
	}
	// A token for another tenant cannot be made on the embedded store.
	if code, b := s.call(t, bootstrap, "POST", "/v1/tokens", `{"scope":"read","tenant":"acme"}`); code != http.StatusBadRequest {
		t.Errorf("token for tenant acme on SQLite = %d %s, want 400", code, b)
	}

	var sess struct {
		ID string `json:"id"`
	}
	s.mustCall(t, http.StatusCreated, submit.Secret, "POST", "/v1/sessions", `{"user":"hi"}`, &sess)
	before := versions(t, s.dev.Backend.Store)
	tokensBefore, err := s.tokens.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	// Near misses of a real token: its prefix, one character changed, its hash.
	flipped := []byte(submit.Secret)
	flipped[len(flipped)-1] ^= 1
	cases := []struct {
		name, token, method, path, body string
		want                            int
	}{
		{"no token", "", "GET", "/v1/sessions", "", 401},
		{"no token write", "", "POST", "/v1/sessions", `{"user":"x"}`, 401},
		{"garbage token", "not-a-token", "GET", "/v1/sessions", "", 401},
		{"token shape, unknown", "rath_" + strings.Repeat("A", 43), "GET", "/v1/sessions", "", 401},
		{"one character changed", string(flipped), "POST", "/v1/sessions", `{"user":"x"}`, 401},
		{"token's hash", auth.HashToken(submit.Secret), "GET", "/v1/sessions", "", 401},
		{"bootstrap prefix", bootstrap[:len(bootstrap)-1], "GET", "/v1/sessions", "", 401},
		{"revoked token", revoked.Secret, "GET", "/v1/sessions", "", 401},
		{"expired token", expired.Secret, "POST", "/v1/sessions", `{"user":"x"}`, 401},
		{"read creates session", read.Secret, "POST", "/v1/sessions", `{"user":"x"}`, 403},
		{"read forks", read.Secret, "POST", "/v1/sessions/" + sess.ID + "/fork", "", 403},
		{"read submits run", read.Secret, "POST", "/v1/runs", `{"agent":` + spec + `,"message":"x"}`, 403},
		{"read imports", read.Secret, "POST", "/v1/sessions/import", "", 403},
		{"submit mints token", submit.Secret, "POST", "/v1/tokens", `{"scope":"admin"}`, 403},
		{"submit lists tokens", submit.Secret, "GET", "/v1/tokens", "", 403},
		{"submit revokes token", submit.Secret, "POST", "/v1/tokens/" + read.ID + "/revoke", "", 403},
		{"read mints token", read.Secret, "POST", "/v1/tokens", `{"scope":"read"}`, 403},
	}
	for _, tc := range cases {
		code, b := s.call(t, tc.token, tc.method, tc.path, tc.body)
		if code != tc.want {
			t.Errorf("%s: %s %s = %d %s, want %d", tc.name, tc.method, tc.path, code, b, tc.want)
			continue
		}
		var e errorBody
		if err := json.Unmarshal(b, &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
			t.Errorf("%s: body %s is not a JSON error", tc.name, b)
		}
		if tc.token != "" && len(tc.token) > 8 && bytes.Contains(b, []byte(tc.token)) {
			t.Errorf("%s: the error quotes the token", tc.name)
		}
	}
	if after := versions(t, s.dev.Backend.Store); after != before {
		t.Errorf("versions %d → %d after refused requests", before, after)
	}
	tokensAfter, err := s.tokens.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(tokensAfter) != len(tokensBefore) {
		t.Errorf("tokens %d → %d after refused requests", len(tokensBefore), len(tokensAfter))
	}
	// The allowed side of the same lines: read reads, submit writes.
	s.mustCall(t, http.StatusOK, read.Secret, "GET", "/v1/sessions/"+sess.ID, "", nil)
	s.mustCall(t, http.StatusCreated, submit.Secret, "POST", "/v1/sessions/"+sess.ID+"/fork", "", nil)
	var who auth.Principal
	s.mustCall(t, http.StatusOK, read.Secret, "GET", "/v1/whoami", "", &who)
	if who.TokenID != read.ID || who.Scope != auth.ScopeRead || who.Tenant != "default" {
		t.Errorf("whoami = %+v, want the read token", who)
	}
	// The use was recorded; the secret is nowhere in the table.
	list, err := s.tokens.List(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range list {
		if tok.ID == read.ID && tok.LastUsedAt == nil {
			t.Error("read token's last use not recorded")
		}
	}
	var leaked int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM api_tokens WHERE hash = $1 OR name = $1 OR id = $1`, read.Secret).Scan(&leaked); err != nil {
		t.Fatal(err)
	}
	if leaked != 0 {
		t.Error("a token's secret is stored in api_tokens")
	}
}

// runRecord is a run as the API shows it: the fields these tests read.
type runRecord struct {
	ID     string  `json:"id"`
	Status string  `json:"status"`
	Output *string `json:"output"`
}

// succeededRun creates a session ("acme's secret prompt", "hello") as
// token, runs the scripted agent spec on it and waits until the run has
// succeeded with an output; it returns the session's id and the run.
func (s *authStack) succeededRun(t *testing.T, token string) (string, runRecord) {
	t.Helper()
	var sess struct {
		ID string `json:"id"`
	}
	s.mustCall(t, http.StatusCreated, token, "POST", "/v1/sessions", `{"system":"acme's secret prompt","user":"hello"}`, &sess)
	var run runRecord
	s.mustCall(t, http.StatusCreated, token, "POST", "/v1/runs", `{"agent":`+spec+`,"session":"`+sess.ID+`"}`, &run)
	testenv.Eventually(t, 30*time.Second, "the run succeeds", func() bool {
		s.mustCall(t, http.StatusOK, token, "GET", "/v1/runs/"+run.ID, "", &run)
		return run.Status == "succeeded"
	})
	if run.Output == nil {
		t.Fatal("the run has no output")
	}
	return sess.ID, run
}

// TestAttackRevokedTokenRefusedThoughCached: with the token cache on (as
// the coordinator program runs by default), a token revoked through the
// API is refused on its next request, though it was just verified and the
// cache would trust it for an hour: by another admin, or by itself. A
// token revoked in the store directly, behind the coordinator's back, is
// refused once the cache's time is up.
func TestAttackRevokedTokenRefusedThoughCached(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newAuthStackWith(t, "sqlite", -1, func(c *coordinator.Config) { c.TokenCacheTTL = time.Hour })
	victim := s.mint(t, auth.ScopeAdmin, "default")
	self := s.mint(t, auth.ScopeAdmin, "default")
	for _, tok := range []api.CreatedToken{victim, self} {
		for range 3 { // verified, then served from the cache
			s.mustCall(t, http.StatusOK, tok.Secret, "GET", "/v1/whoami", "", nil)
		}
	}
	s.mustCall(t, http.StatusOK, bootstrap, "POST", "/v1/tokens/"+victim.ID+"/revoke", "", nil)
	if code, b := s.call(t, victim.Secret, "GET", "/v1/whoami", ""); code != http.StatusUnauthorized {
		t.Errorf("revoked by an admin, the next request = %d %s, want 401", code, b)
	}
	s.mustCall(t, http.StatusOK, self.Secret, "POST", "/v1/tokens/"+self.ID+"/revoke", "", nil)
	if code, b := s.call(t, self.Secret, "GET", "/v1/tokens", ""); code != http.StatusUnauthorized {
		t.Errorf("revoked by itself, the next request = %d %s, want 401", code, b)
	}

	// Behind the coordinator's back: the store revokes, the cache does not
	// hear of it and lets go of the token when its TTL is up.
	short := newAuthStackWith(t, "sqlite", -1, func(c *coordinator.Config) { c.TokenCacheTTL = 50 * time.Millisecond })
	tok := short.mint(t, auth.ScopeRead, "default")
	short.mustCall(t, http.StatusOK, tok.Secret, "GET", "/v1/whoami", "", nil)
	revoked := time.Now()
	if _, err := short.tokens.Revoke(ctx, tok.ID, ""); err != nil {
		t.Fatal(err)
	}
	short.untilRefused(t, tok.Secret, revoked, "a token revoked in the store (cache TTL 50ms)")
}

// untilRefused asks whoami with secret until it is refused (401), and
// fails the test when it is still served 5 s after since, or answered
// with anything else. It returns how long after since the refusal came.
func (s *authStack) untilRefused(t *testing.T, secret string, since time.Time, what string) time.Duration {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		code, b := s.call(t, secret, "GET", "/v1/whoami", "")
		if code == http.StatusUnauthorized {
			return time.Since(since)
		}
		if code != http.StatusOK {
			t.Fatalf("whoami = %d %s", code, b)
		}
		if waited := time.Since(since); waited > 5*time.Second {
			t.Fatalf("%s: still served %v later", what, waited)
		}
		<-tick.C
	}
}

// TestAttackTokenRevokedOnOneReplicaRefusedByAnother: two coordinators
// over one store and bus, each trusting a verified token for an hour. A
// token revoked through one is refused by the other as soon as the
// revocation's announcement reaches it, not an hour later.
func TestAttackTokenRevokedOnOneReplicaRefusedByAnother(t *testing.T) {
	t.Parallel()
	one := newAuthStackWith(t, "sqlite", -1, func(c *coordinator.Config) { c.TokenCacheTTL = time.Hour })
	two := one.replica(t, nil)
	tok := one.mint(t, auth.ScopeRead, "default")
	for range 3 { // verified by replica two, then served from its cache
		two.mustCall(t, http.StatusOK, tok.Secret, "GET", "/v1/whoami", "", nil)
	}
	revoked := time.Now()
	one.mustCall(t, http.StatusOK, bootstrap, "POST", "/v1/tokens/"+tok.ID+"/revoke", "", nil)
	took := two.untilRefused(t, tok.Secret, revoked, "replica two, a token replica one revoked (its cache's TTL: 1h)")
	t.Logf("replica two refused the token %v after replica one's revocation returned", took)
}

// TestAttackTokenRevokedWhileAReplicaIsCutOff: a replica whose NATS
// connection is lost cannot hear other replicas' revocations, so from the
// moment it notices it trusts no cached token until the connection is
// back: a token revoked through another replica meanwhile, its
// announcement lost to the replica that had it cached for an hour, is
// refused by that replica at once, and still after the connection is back.
func TestAttackTokenRevokedWhileAReplicaIsCutOff(t *testing.T) {
	t.Parallel()
	one := newAuthStackWith(t, "sqlite", -1, func(c *coordinator.Config) { c.TokenCacheTTL = time.Hour })
	link := testenv.NewProxy(t, strings.TrimPrefix(one.dev.Backend.NC.ConnectedUrl(), "nats://"))
	nc, err := nats.Connect("nats://"+link.Addr(), app.NATSOptions("replica-two")...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	b, err := bus.New(context.Background(), nc, bus.Config{})
	if err != nil {
		t.Fatal(err)
	}
	metrics := telemetry.NewMetrics(prometheus.NewRegistry())
	cfg := one.cfg
	cfg.Metrics = metrics
	two := serveCoordinator(t, one.dev, b, one.tokens, cfg, true)
	suspended := func() float64 { return testutil.ToFloat64(metrics.TokenCacheSuspended) }
	fromCache := func() float64 { return testutil.ToFloat64(metrics.TokenLookups.WithLabelValues("cache")) }

	tok := one.mint(t, auth.ScopeRead, "default")
	// Replica two listens for revocations, then serves the token from its
	// cache.
	testenv.Eventually(t, 10*time.Second, "replica two to serve the token from its cache", func() bool {
		two.mustCall(t, http.StatusOK, tok.Secret, "GET", "/v1/whoami", "", nil)
		return suspended() == 0 && fromCache() > 0
	})

	link.Cut()
	testenv.Eventually(t, 10*time.Second, "replica two to notice its NATS connection lost", func() bool { return suspended() == 1 })
	revoked := time.Now()
	one.mustCall(t, http.StatusOK, bootstrap, "POST", "/v1/tokens/"+tok.ID+"/revoke", "", nil)
	took := two.untilRefused(t, tok.Secret, revoked, "replica two, cut off from NATS, a token revoked through replica one (its cache's TTL: 1h)")
	t.Logf("replica two refused the token %v after the revocation returned", took)

	link.Heal()
	testenv.Eventually(t, 10*time.Second, "replica two to listen again", func() bool { return suspended() == 0 })
	if code, body := two.call(t, tok.Secret, "GET", "/v1/whoami", ""); code != http.StatusUnauthorized {
		t.Fatalf("after the link healed: whoami = %d %s, want 401", code, body)
	}
	// Listening again, it caches again.
	other := one.mint(t, auth.ScopeRead, "default")
	before := fromCache()
	for range 3 {
		two.mustCall(t, http.StatusOK, other.Secret, "GET", "/v1/whoami", "", nil)
	}
	if got := fromCache() - before; got < 2 {
		t.Fatalf("after the link healed, %v of 3 requests were answered from the cache, want 2", got)
	}
}

// TestAttackTokenRevokedOnAnUncachedReplica: a replica that caches no
// tokens (--token-cache 0, as during a rollout of the setting) still
// announces what it revokes, so a replica that caches drops it at once.
func TestAttackTokenRevokedOnAnUncachedReplica(t *testing.T) {
	t.Parallel()
	uncached := newAuthStackWith(t, "sqlite", -1, nil)
	cached := uncached.replica(t, func(c *coordinator.Config) { c.TokenCacheTTL = time.Hour })
	tok := uncached.mint(t, auth.ScopeRead, "default")
	cached.mustCall(t, http.StatusOK, tok.Secret, "GET", "/v1/whoami", "", nil)
	revoked := time.Now()
	uncached.mustCall(t, http.StatusOK, bootstrap, "POST", "/v1/tokens/"+tok.ID+"/revoke", "", nil)
	took := cached.untilRefused(t, tok.Secret, revoked, "the caching replica, a token the uncached one revoked (its cache's TTL: 1h)")
	t.Logf("the caching replica refused the token %v after the revocation returned", took)
}
