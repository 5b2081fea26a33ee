package auth_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/auth"
)

// TestTokenAPIKeepsTheJSON: a token encodes to the same JSON as the API's
// type (GET /v1/tokens and rathctl token list -o json print it).
func TestTokenAPIKeepsTheJSON(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tok := range []auth.Token{
		{ID: "tok_1", Name: "n", Tenant: "acme", Scope: auth.ScopeSubmit, CreatedAt: now, ExpiresAt: &now, LastUsedAt: &now, RevokedAt: &now},
		{ID: "tok_2", Tenant: "default", Scope: auth.ScopeRead, CreatedAt: now},
	} {
		want, _ := json.Marshal(tok)
		got, _ := json.Marshal(tok.API())
		if string(got) != string(want) {
			t.Errorf("API JSON\n%s\nwant\n%s", got, want)
		}
	}
}
