package auth

import (
	"context"
	"errors"
	"fmt"
	"regexp"
)

// Scope is what a token may do. Scopes are ordered: admin ⊇ submit ⊇ read.
type Scope string

// The scopes.
const (
	// ScopeRead may read: GET requests.
	ScopeRead Scope = "read"
	// ScopeSubmit may also create runs and sessions and decide approvals.
	ScopeSubmit Scope = "submit"
	// ScopeAdmin may also manage tokens and run gc, redaction and verify.
	ScopeAdmin Scope = "admin"
)

// rank orders the scopes; 0 is not a scope.
func (s Scope) rank() int {
	switch s {
	case ScopeRead:
		return 1
	case ScopeSubmit:
		return 2
	case ScopeAdmin:
		return 3
	}
	return 0
}

// Valid reports whether s is one of the three scopes.
func (s Scope) Valid() bool { return s.rank() > 0 }

// Allows reports whether a holder of s may do what needs need. An invalid
// scope allows nothing and is allowed by nothing.
func (s Scope) Allows(need Scope) bool {
	return s.Valid() && need.Valid() && s.rank() >= need.rank()
}

// ParseScope parses "read", "submit" or "admin".
func ParseScope(s string) (Scope, error) {
	if sc := Scope(s); sc.Valid() {
		return sc, nil
	}
	return "", fmt.Errorf("scope %q: want read, submit or admin", s)
}

// DefaultTenant is the tenant of tokens that name none, of every row that
// existed before tenants, of `rathctl dev` and of the bootstrap token.
const DefaultTenant = "default"

// tenantRE is what a tenant may be called: it travels in a Postgres
// setting and in NATS subjects, so it is kept to a safe alphabet.
var tenantRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// ErrInvalidTenant marks a tenant name outside [a-z0-9][a-z0-9_-]{0,62}.
var ErrInvalidTenant = errors.New("tenant: want 1-63 characters of a-z, 0-9, _ and -, starting with a letter or digit")

// ValidTenant checks a tenant name.
func ValidTenant(t string) error {
	if !tenantRE.MatchString(t) {
		return fmt.Errorf("%w (got %q)", ErrInvalidTenant, t)
	}
	return nil
}

// Principal is who a request acts as.
type Principal struct {
	// TokenID is the public id of the token ("bootstrap" for the
	// coordinator's configured token, "" when authentication is off).
	TokenID string `json:"token_id"`
	Name    string `json:"name,omitempty"`
	Tenant  string `json:"tenant"`
	Scope   Scope  `json:"scope"`
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal ctx carries, if any.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// TenantFrom returns the tenant of ctx's principal, or "" when ctx carries
// none (system work: the reconciler, workers).
func TenantFrom(ctx context.Context) string {
	p, _ := PrincipalFrom(ctx)
	return p.Tenant
}
