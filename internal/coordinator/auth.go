package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sort"
	"sync"

	"github.com/rath-run/rath/internal/auth"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/telemetry"
	"github.com/rath-run/rath/pkg/store"
)

// RouteScopes is the one table of the scope each /v1 route requires
// (docs/security.md). A route registered on the API mux without an entry
// here is refused (500, fail closed) when authentication is on, and fails
// TestEveryRouteHasAScope.
var RouteScopes = map[string]auth.Scope{
	"POST /v1/runs":                     auth.ScopeSubmit,
	"GET /v1/runs":                      auth.ScopeRead,
	"GET /v1/runs/{id}":                 auth.ScopeRead,
	"POST /v1/runs/{id}/cancel":         auth.ScopeSubmit,
	"POST /v1/runs/{id}/approvals":      auth.ScopeSubmit,
	"POST /v1/runs/{id}/review":         auth.ScopeSubmit,
	"GET /v1/runs/{id}/events":          auth.ScopeRead,
	"PUT /v1/runs/{id}/steps/{key}":     auth.ScopeSubmit,
	"GET /v1/runs/{id}/steps/{key}":     auth.ScopeRead,
	"POST /v1/runs/{id}/complete":       auth.ScopeSubmit,
	"POST /v1/runs/{id}/fail":           auth.ScopeSubmit,
	"POST /v1/runs/{id}/accept-changes": auth.ScopeSubmit,
	"POST /v1/versions":                 auth.ScopeSubmit,
	"GET /v1/versions/{id}":             auth.ScopeRead,
	"GET /v1/versions/{id}/common-base": auth.ScopeRead,
	"POST /v1/sessions":                 auth.ScopeSubmit,
	"GET /v1/sessions":                  auth.ScopeRead,
	"GET /v1/sessions/{id}":             auth.ScopeRead,
	"GET /v1/sessions/{id}/transcript":  auth.ScopeRead,
	"GET /v1/sessions/{id}/ancestors":   auth.ScopeRead,
	"GET /v1/sessions/{id}/descendants": auth.ScopeRead,
	"POST /v1/sessions/{id}/append":     auth.ScopeSubmit,
	"POST /v1/sessions/{id}/fork":       auth.ScopeSubmit,
	"POST /v1/sessions/{id}/detach":     auth.ScopeSubmit,
	"POST /v1/sessions/{id}/merge":      auth.ScopeSubmit,
	"POST /v1/sessions/{id}/place":      auth.ScopeSubmit,
	"GET /v1/sessions/{id}/export":      auth.ScopeRead,
	"POST /v1/export/trajectories":      auth.ScopeRead,
	"POST /v1/export/pairs":             auth.ScopeRead,
	"POST /v1/sessions/import":          auth.ScopeSubmit,
	"GET /v1/sessions/{id}/files":       auth.ScopeRead,
	"GET /v1/sessions/{id}/diff":        auth.ScopeRead,
	"GET /v1/sessions/{id}/graph":       auth.ScopeRead,
	"GET /v1/sessions/{id}/blame":       auth.ScopeRead,
	"GET /v1/runs/{id}/graph":           auth.ScopeRead,

	"GET /v1/whoami":              auth.ScopeRead,
	"GET /v1/memory/items":        auth.ScopeRead,
	"GET /v1/memory/item":         auth.ScopeRead,
	"POST /v1/memory/recall":      auth.ScopeRead,
	"POST /v1/memory/items":       auth.ScopeSubmit,
	"DELETE /v1/memory/item":      auth.ScopeSubmit,
	"POST /v1/memory/commit":      auth.ScopeSubmit,
	"GET /v1/tokens":              auth.ScopeAdmin,
	"POST /v1/tokens":             auth.ScopeAdmin,
	"POST /v1/tokens/{id}/revoke": auth.ScopeAdmin,

	// Retention, redaction and check (admin.go, issue #20): reading pins
	// and redaction records is read (a tenant's read token already reads
	// its transcripts); pinning is admin (a pin keeps data from gc); gc,
	// redaction and check are admin.
	"POST /v1/admin/gc":             auth.ScopeAdmin,
	"GET /v1/pins":                  auth.ScopeRead,
	"POST /v1/versions/{id}/pin":    auth.ScopeAdmin,
	"DELETE /v1/versions/{id}/pin":  auth.ScopeAdmin,
	"POST /v1/versions/{id}/redact": auth.ScopeAdmin,
	"GET /v1/redactions":            auth.ScopeRead,
	"POST /v1/admin/check":          auth.ScopeAdmin,

	// A workspace file's bytes (issue #20).
	"GET /v1/sessions/{id}/files/{path...}": auth.ScopeRead,

	// Lineage operations through the coordinator (issue #20).
	"GET /v1/sessions/{id}/verify":  auth.ScopeRead,
	"GET /v1/verify":                auth.ScopeRead,
	"GET /v1/runs/{id}/dossier":     auth.ScopeRead,
	"POST /v1/versions/{id}/replay": auth.ScopeSubmit,

	// Whole-run replay (issue #21).
	"POST /v1/runs/{id}/replay": auth.ScopeSubmit,
	"POST /v1/runs/{id}/rerun":  auth.ScopeSubmit,
}

// TenantStores gives each tenant a graph store and run store confined to
// its rows (*auth.TenantPools on Postgres).
type TenantStores interface {
	For(ctx context.Context, tenant string) (store.Store, *runs.Store, error)
}

// apiMux is the /v1 mux: it records the patterns registered on it, so the
// scope check and its test can see every route.
type apiMux struct {
	*http.ServeMux
	mu       sync.Mutex
	patterns []string
}

func newAPIMux() *apiMux { return &apiMux{ServeMux: http.NewServeMux()} }

// HandleFunc registers a route (see [http.ServeMux.HandleFunc]).
func (m *apiMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(h))
}

// Handle registers a route (see [http.ServeMux.Handle]).
func (m *apiMux) Handle(pattern string, h http.Handler) {
	m.mu.Lock()
	m.patterns = append(m.patterns, pattern)
	m.mu.Unlock()
	m.ServeMux.Handle(pattern, h)
}

// Patterns returns the registered patterns, sorted.
func (m *apiMux) Patterns() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := append([]string(nil), m.patterns...)
	sort.Strings(out)
	return out
}

// authOn reports whether /v1 requests must authenticate.
func (c *Coordinator) authOn() bool { return c.cfg.Token != "" || c.cfg.RequireAuth }

// authenticator returns the coordinator's authenticator.
func (c *Coordinator) authenticator() *auth.Authenticator {
	return &auth.Authenticator{Bootstrap: c.cfg.Token, Tokens: c.tokens}
}

// auth authenticates a /v1 request, checks the scope RouteScopes requires
// for the route it matches, and binds the request to its tenant's stores.
// Unauthenticated: 401; authenticated without the scope: 403. A request
// that matches no route is left to the mux (404/405) once authenticated.
func (c *Coordinator) auth(api *apiMux) http.Handler {
	c.routes.Store(api)
	if !c.authOn() {
		// Every request acts as the system: one tenant, its own stores.
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			serveIn(withScope(r.Context(), c.SystemScope()), api, w, r)
		})
	}
	authn := c.authenticator()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := authn.Authenticate(r.Context(), r.Header.Get("Authorization"))
		if err != nil {
			if !errors.Is(err, auth.ErrUnauthenticated) {
				// The error comes from the token store, never quotes the token.
				c.log.ErrorContext(r.Context(), "authenticate", slog.Any("error", err))
				writeError(w, http.StatusServiceUnavailable, "unavailable", "cannot check the token now")
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="rath"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", auth.ErrUnauthenticated.Error())
			return
		}
		_, pattern := api.Handler(r)
		if pattern != "" {
			need, ok := RouteScopes[pattern]
			if !ok {
				c.log.ErrorContext(r.Context(), "route has no declared scope", slog.String("route", pattern))
				writeError(w, http.StatusInternalServerError, "internal", "route "+pattern+" declares no scope")
				return
			}
			if !p.Scope.Allows(need) {
				writeError(w, http.StatusForbidden, "forbidden", "this token's scope is "+string(p.Scope)+"; "+pattern+" needs "+string(need))
				return
			}
		}
		ctx := auth.WithPrincipal(r.Context(), p)
		sc, err := c.bindTenant(ctx, p)
		if err != nil {
			if errors.Is(err, auth.ErrSingleTenant) {
				writeError(w, http.StatusForbidden, "forbidden", err.Error())
				return
			}
			c.log.ErrorContext(r.Context(), "open tenant stores", slog.String("tenant", p.Tenant), slog.Any("error", err))
			writeError(w, http.StatusServiceUnavailable, "unavailable", "cannot open the tenant's stores now")
			return
		}
		// The request's scope, resolved here once: the run service's
		// methods take it from the handlers explicitly, and every other
		// handler's stores come from it (graphOf, runsOf, memoryOf,
		// retentionOf).
		serveIn(withScope(ctx, sc), api, w, r)
	})
}

// serveIn serves r with ctx on api, then gives r the route pattern api
// matched: request spans (instrument) are named by it, not by the /v1/
// prefix the outer mux matched.
func serveIn(ctx context.Context, api http.Handler, w http.ResponseWriter, r *http.Request) {
	in := r.WithContext(ctx)
	api.ServeHTTP(w, in)
	if in.Pattern != "" {
		r.Pattern = in.Pattern
	}
}

// bindTenant resolves the scope of principal p: its tenant's confined
// pools when the coordinator has TenantStores, else (the embedded store)
// the coordinator's own stores, for the default tenant only.
func (c *Coordinator) bindTenant(ctx context.Context, p auth.Principal) (Scope, error) {
	if c.cfg.Tenants == nil {
		if p.Tenant != auth.DefaultTenant {
			return Scope{}, auth.ErrSingleTenant
		}
		sc := c.SystemScope()
		sc.Principal = p
		return sc, nil
	}
	g, rs, err := c.cfg.Tenants.For(ctx, p.Tenant)
	if err != nil {
		return Scope{}, err
	}
	return Scope{Tenant: p.Tenant, Principal: p, Graph: g, Runs: rs, pooled: true}, nil
}

// graphOf returns the graph store of ctx's scope: its tenant's, else the
// coordinator's own (system work, or authentication off).
func (c *Coordinator) graphOf(ctx context.Context) store.Store { return c.scopeOf(ctx).Graph }

// runsOf returns the run store of ctx's scope (see graphOf).
func (c *Coordinator) runsOf(ctx context.Context) *runs.Store { return c.scopeOf(ctx).Runs }

// Routes returns the /v1 route patterns of the handler Handler built last,
// sorted (nil before Handler is called).
func (c *Coordinator) Routes() []string {
	if api := c.routes.Load(); api != nil {
		return api.Patterns()
	}
	return nil
}

// storeTokens is the store's token verification, counted as answered by
// the store (the coordinator without a token cache).
type storeTokens struct {
	s *auth.Store
	m *telemetry.Metrics
}

func (t storeTokens) Authenticate(ctx context.Context, token string) (auth.Principal, error) {
	if auth.LooksLikeToken(token) {
		t.m.TokenLookup(false)
	}
	return t.s.Authenticate(ctx, token)
}
