package coordinator

import (
	"errors"
	"net/http"
	"time"

	"github.com/rath-run/rath/internal/auth"
	"github.com/rath-run/rath/pkg/api"
)

// authRoutes registers GET /v1/whoami and the token endpoints.
func (c *Coordinator) authRoutes(api *apiMux) {
	api.HandleFunc("GET /v1/whoami", c.whoami)
	api.HandleFunc("GET /v1/tokens", c.listTokens)
	api.HandleFunc("POST /v1/tokens", c.createToken)
	api.HandleFunc("POST /v1/tokens/{id}/revoke", c.revokeToken)
}

// principal returns the request's principal; with authentication off it is
// an admin of the default tenant (the API is open).
func principal(r *http.Request) auth.Principal {
	if p, ok := auth.PrincipalFrom(r.Context()); ok {
		return p
	}
	return auth.Principal{Tenant: auth.DefaultTenant, Scope: auth.ScopeAdmin}
}

func (c *Coordinator) whoami(w http.ResponseWriter, r *http.Request) {
	p := principal(r)
	writeJSON(w, http.StatusOK, api.Principal{TokenID: p.TokenID, Name: p.Name, Tenant: p.Tenant, Scope: api.Scope(p.Scope)})
}

// operator reports whether p may manage every tenant's tokens: an admin of
// the default tenant (the bootstrap token is one).
func operator(p auth.Principal) bool {
	return p.Scope == auth.ScopeAdmin && p.Tenant == auth.DefaultTenant
}

func (c *Coordinator) tokenStore(w http.ResponseWriter) (*auth.Store, bool) {
	if c.cfg.Tokens == nil {
		writeError(w, http.StatusNotImplemented, "not_implemented", "this coordinator has no token store")
		return nil, false
	}
	return c.cfg.Tokens, true
}

func (c *Coordinator) createToken(w http.ResponseWriter, r *http.Request) {
	ts, ok := c.tokenStore(w)
	if !ok {
		return
	}
	var req api.CreateTokenRequest
	if !c.decode(w, r, &req) {
		return
	}
	p := principal(r)
	if req.Tenant == "" {
		req.Tenant = p.Tenant
	}
	if req.Tenant != p.Tenant && !operator(p) {
		writeError(w, http.StatusForbidden, "forbidden", "tenant: only an admin of the default tenant may create tokens for another tenant")
		return
	}
	scope, err := auth.ParseScope(string(req.Scope))
	if err != nil {
		c.fail(w, r, badRequest("%v", err))
		return
	}
	var ttl time.Duration
	if req.TTL != "" {
		if ttl, err = time.ParseDuration(req.TTL); err != nil || ttl <= 0 {
			c.fail(w, r, badRequest("ttl: %q is not a positive duration", req.TTL))
			return
		}
	}
	t, secret, err := ts.Create(r.Context(), auth.CreateParams{Name: req.Name, Tenant: req.Tenant, Scope: scope, TTL: ttl})
	switch {
	case errors.Is(err, auth.ErrInvalidTenant):
		c.fail(w, r, badRequest("%v", err))
		return
	case errors.Is(err, auth.ErrSingleTenant):
		writeError(w, http.StatusBadRequest, "bad_request", "tenant: "+err.Error())
		return
	case err != nil:
		c.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, api.CreatedToken{Token: t.API(), Secret: secret})
}

// tenantFilter is the tenant whose tokens p manages ("" for every tenant).
func tenantFilter(p auth.Principal) string {
	if operator(p) {
		return ""
	}
	return p.Tenant
}

func (c *Coordinator) listTokens(w http.ResponseWriter, r *http.Request) {
	ts, ok := c.tokenStore(w)
	if !ok {
		return
	}
	list, err := ts.List(r.Context(), tenantFilter(principal(r)))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	out := api.TokenList{Tokens: make([]api.Token, len(list))}
	for i, t := range list {
		out.Tokens[i] = t.API()
	}
	writeJSON(w, http.StatusOK, out)
}

func (c *Coordinator) revokeToken(w http.ResponseWriter, r *http.Request) {
	ts, ok := c.tokenStore(w)
	if !ok {
		return
	}
	t, err := ts.Revoke(r.Context(), r.PathValue("id"), tenantFilter(principal(r)))
	if err == nil {
		c.tokenRevoked(r.Context(), t.ID)
	}
	if errors.Is(err, auth.ErrNotFound) {
		writeError(w, http.StatusNotFound, "not_found", err.Error())
		return
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, t.API())
}
