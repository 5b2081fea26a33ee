package app

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/rath-run/rath/internal/auth"
	"github.com/rath-run/rath/pkg/store/sqlitestore"
)

// TestAuthMode resolves the coordinator's --auth setting: auto turns
// authentication on with a bootstrap token or a live stored token, off
// refuses a bootstrap token, and anything else is an error.
func TestAuthMode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sq, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "rath.db"), sqlitestore.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sq.Close() })
	tokens := auth.NewStore(sq.DB(), false)
	check := func(mode, bootstrap string, want, wantErr bool) {
		t.Helper()
		got, err := AuthMode(ctx, mode, bootstrap, tokens)
		if (err != nil) != wantErr || (err == nil && got != want) {
			t.Errorf("AuthMode(%q, bootstrap %t) = %v, %v; want %v (error %v)", mode, bootstrap != "", got, err, want, wantErr)
		}
	}
	check("", "", false, false)
	check("auto", "", false, false)
	check("auto", "boot", true, false)
	check("required", "", true, false)
	check("off", "", false, false)
	check("off", "boot", false, true)
	check("on", "", false, true)
	if _, _, err := tokens.Create(ctx, auth.CreateParams{Scope: auth.ScopeRead}); err != nil {
		t.Fatal(err)
	}
	check("", "", true, false)
	check("off", "", false, false)
}
