package api

import "time"

// Scope is what a token may do: read < submit < admin.
type Scope string

// Scopes.
const (
	ScopeRead   Scope = "read"
	ScopeSubmit Scope = "submit"
	ScopeAdmin  Scope = "admin"
)

// Principal is who a request acts as: the reply of GET /v1/whoami.
type Principal struct {
	// TokenID is the public id of the token ("bootstrap" for the
	// coordinator's configured token, "" when authentication is off).
	TokenID string `json:"token_id"`
	Name    string `json:"name,omitempty"`
	Tenant  string `json:"tenant"`
	Scope   Scope  `json:"scope"`
}

// Token is an API token as the API shows it (never its secret).
type Token struct {
	ID         string     `json:"id"`
	Name       string     `json:"name,omitempty"`
	Tenant     string     `json:"tenant"`
	Scope      Scope      `json:"scope"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

// TokenList is the reply of GET /v1/tokens: the caller's tenant's tokens
// (every tenant's for an admin of the default tenant).
type TokenList struct {
	Tokens []Token `json:"tokens"`
}

// CreateTokenRequest is the body of POST /v1/tokens.
type CreateTokenRequest struct {
	Name string `json:"name,omitempty"`
	// Tenant defaults to the caller's; only an operator (an admin of the
	// default tenant) may name another.
	Tenant string `json:"tenant,omitempty"`
	Scope  Scope  `json:"scope"`
	// TTL is a Go duration ("720h"); empty: the token does not expire.
	TTL string `json:"ttl,omitempty"`
}

// CreatedToken is the reply of POST /v1/tokens: the token and, this once,
// its secret.
type CreatedToken struct {
	Token
	Secret string `json:"token"`
}
