package auth_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/auth"
	"github.com/rath-run/rath/pkg/store/sqlitestore"
)

func TestNewTokenShapeAndHash(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 100 {
		tok, hash, err := auth.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		if !auth.LooksLikeToken(tok) || len(tok) != len(auth.TokenPrefix)+43 {
			t.Fatalf("token %q has the wrong shape", tok)
		}
		if hash != auth.HashToken(tok) || len(hash) != 64 {
			t.Fatalf("hash %q", hash)
		}
		if seen[tok] {
			t.Fatal("a token repeated")
		}
		seen[tok] = true
	}
}

func TestScopesOrdered(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		have, need auth.Scope
		ok         bool
	}{
		{auth.ScopeRead, auth.ScopeRead, true}, {auth.ScopeRead, auth.ScopeSubmit, false}, {auth.ScopeRead, auth.ScopeAdmin, false},
		{auth.ScopeSubmit, auth.ScopeRead, true}, {auth.ScopeSubmit, auth.ScopeSubmit, true}, {auth.ScopeSubmit, auth.ScopeAdmin, false},
		{auth.ScopeAdmin, auth.ScopeRead, true}, {auth.ScopeAdmin, auth.ScopeAdmin, true},
		{"", auth.ScopeRead, false}, {auth.ScopeAdmin, "", false}, {"root", auth.ScopeRead, false},
	} {
		if got := tc.have.Allows(tc.need); got != tc.ok {
			t.Errorf("%q.Allows(%q) = %v, want %v", tc.have, tc.need, got, tc.ok)
		}
	}
}

// TestStoreLifecycle runs the token store on the embedded store: create,
// authenticate, list without secrets, revoke, expire, bad input.
func TestStoreLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sq, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "rath.db"), sqlitestore.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sq.Close() })
	st := auth.NewStore(sq.DB(), false)

	tok, secret, err := st.Create(ctx, auth.CreateParams{Name: "ci", Scope: auth.ScopeSubmit, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if tok.Tenant != auth.DefaultTenant || tok.ExpiresAt == nil {
		t.Fatalf("created %+v", tok)
	}
	p, err := st.Authenticate(ctx, secret)
	if err != nil || p.TokenID != tok.ID || p.Scope != auth.ScopeSubmit || p.Tenant != auth.DefaultTenant {
		t.Fatalf("Authenticate = %+v, %v", p, err)
	}
	list, err := st.List(ctx, "")
	if err != nil || len(list) != 1 || list[0].LastUsedAt == nil {
		t.Fatalf("List = %+v, %v (want one token, its use recorded)", list, err)
	}
	if n, err := st.Live(ctx); err != nil || n != 1 {
		t.Fatalf("Live = %d, %v", n, err)
	}
	for _, bad := range []auth.CreateParams{
		{Scope: "root"},
		{Scope: auth.ScopeRead, Tenant: "Bad Tenant"},
		{Scope: auth.ScopeRead, Tenant: "acme"}, // SQLite: one tenant
		{Scope: auth.ScopeRead, TTL: -time.Second},
	} {
		if _, _, err := st.Create(ctx, bad); err == nil {
			t.Errorf("Create(%+v) succeeded", bad)
		}
	}
	if _, _, err := st.Create(ctx, auth.CreateParams{Scope: auth.ScopeRead, Tenant: "acme"}); !errors.Is(err, auth.ErrSingleTenant) {
		t.Errorf("tenant on SQLite: %v, want ErrSingleTenant", err)
	}
	if _, err := st.Revoke(ctx, "tok_nope", ""); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("Revoke(unknown) = %v", err)
	}
	if _, err := st.Revoke(ctx, tok.ID, "other"); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("Revoke in another tenant = %v, want ErrNotFound", err)
	}
	rev, err := st.Revoke(ctx, tok.ID, auth.DefaultTenant)
	if err != nil || rev.RevokedAt == nil {
		t.Fatalf("Revoke = %+v, %v", rev, err)
	}
	if _, err := st.Authenticate(ctx, secret); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("revoked token: %v", err)
	}
	if n, err := st.Live(ctx); err != nil || n != 0 {
		t.Fatalf("Live after revoke = %d, %v", n, err)
	}
	// Expired.
	_, exp, err := st.Create(ctx, auth.CreateParams{Scope: auth.ScopeRead, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sq.DB().ExecContext(ctx, `UPDATE api_tokens SET expires_at = $1 WHERE hash = $2`, time.Now().Add(-time.Second).UTC(), auth.HashToken(exp)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Authenticate(ctx, exp); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("expired token: %v", err)
	}
}
