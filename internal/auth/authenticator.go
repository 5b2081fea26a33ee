package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"strings"
)

// BootstrapTokenID is the TokenID of the principal the coordinator's
// configured token (RATH_TOKEN) authenticates as.
const BootstrapTokenID = "bootstrap"

// Verifier checks stored tokens; *Store is one.
type Verifier interface {
	Authenticate(ctx context.Context, token string) (Principal, error)
}

// Authenticator turns an Authorization header into a Principal.
type Authenticator struct {
	// Bootstrap, when set, is a token that authenticates as an admin of
	// [DefaultTenant] (the operator's RATH_TOKEN). It need not have the
	// rath_ shape.
	Bootstrap string
	// Tokens checks stored tokens; nil when there is no token store.
	Tokens Verifier
}

// Authenticate returns the principal of header ("Bearer <token>"), or
// [ErrUnauthenticated].
func (a *Authenticator) Authenticate(ctx context.Context, header string) (Principal, error) {
	token, ok := strings.CutPrefix(header, "Bearer ")
	if !ok || token == "" {
		return Principal{}, ErrUnauthenticated
	}
	if a.Bootstrap != "" {
		// Compare hashes so the comparison's time does not depend on where
		// the strings differ nor on their lengths.
		got, want := sha256.Sum256([]byte(token)), sha256.Sum256([]byte(a.Bootstrap))
		if subtle.ConstantTimeCompare(got[:], want[:]) == 1 {
			return Principal{TokenID: BootstrapTokenID, Name: "bootstrap", Tenant: DefaultTenant, Scope: ScopeAdmin}, nil
		}
	}
	if a.Tokens == nil {
		return Principal{}, ErrUnauthenticated
	}
	return a.Tokens.Authenticate(ctx, token)
}
