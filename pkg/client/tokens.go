package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/rath-run/rath/pkg/api"
)

// WhoAmI returns who the client's token acts as (GET /v1/whoami): its
// token id, name, tenant and scope. With authentication off the
// coordinator answers an admin of the default tenant. A bad, revoked or
// expired token is an [APIError] with status 401.
func (c *Client) WhoAmI(ctx context.Context) (api.Principal, error) {
	var p api.Principal
	err := c.Do(ctx, http.MethodGet, "/v1/whoami", nil, &p)
	return p, err
}

// ListTokens lists the caller's tenant's API tokens (every tenant's for an
// admin of the default tenant), never their secrets (GET /v1/tokens;
// admin scope).
func (c *Client) ListTokens(ctx context.Context) ([]api.Token, error) {
	var l api.TokenList
	if err := c.Do(ctx, http.MethodGet, "/v1/tokens", nil, &l); err != nil {
		return nil, err
	}
	return l.Tokens, nil
}

// CreateToken creates an API token (POST /v1/tokens; admin scope). The
// reply's Secret is shown this once.
func (c *Client) CreateToken(ctx context.Context, req api.CreateTokenRequest) (api.CreatedToken, error) {
	if req.Scope == "" {
		return api.CreatedToken{}, fmt.Errorf("client: create token: scope: required (read, submit or admin)")
	}
	var t api.CreatedToken
	err := c.Do(ctx, http.MethodPost, "/v1/tokens", req, &t)
	return t, err
}

// RevokeToken revokes the token id (POST /v1/tokens/{id}/revoke; admin
// scope) and returns it with its revoked_at. An unknown id, or one of
// another tenant, matches [ErrNotFound].
func (c *Client) RevokeToken(ctx context.Context, id string) (api.Token, error) {
	if id == "" {
		return api.Token{}, fmt.Errorf("client: revoke token: id is empty")
	}
	var t api.Token
	err := c.Do(ctx, http.MethodPost, "/v1/tokens/"+url.PathEscape(id)+"/revoke", nil, &t)
	return t, err
}
