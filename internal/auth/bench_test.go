package auth_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/rath-run/rath/internal/auth"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/store/sqlitestore"
)

// BenchmarkAuthenticate measures checking a stored token (the lookup by
// hash every authenticated request makes; its use is written once a
// minute) on both backends.
//
//	go test -run XXX -bench Authenticate -benchtime 2000x ./internal/auth/
func BenchmarkAuthenticate(b *testing.B) {
	ctx := context.Background()
	b.Run("sqlite", func(b *testing.B) {
		sq, err := sqlitestore.Open(ctx, filepath.Join(b.TempDir(), "rath.db"), sqlitestore.Options{Migrate: true})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = sq.Close() })
		benchAuthenticate(b, auth.NewStore(sq.DB(), false))
	})
	b.Run("postgres", func(b *testing.B) {
		_, url := migrated(b)
		benchAuthenticate(b, auth.NewStore(sqlDB(b, url), true))
	})
}

func benchAuthenticate(b *testing.B, st *auth.Store) {
	ctx := context.Background()
	_, secret, err := st.Create(ctx, auth.CreateParams{Scope: auth.ScopeRead})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := st.Authenticate(ctx, secret); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRowLevelSecurity compares one uncached query (a page of 50
// versions out of 1,000, half another tenant's) through the system
// connection and through a tenant's confined pool, where row-level
// security filters it.
//
//	go test -run XXX -bench RowLevelSecurity -benchtime 2000x ./internal/auth/
func BenchmarkRowLevelSecurity(b *testing.B) {
	ctx := context.Background()
	sys, url := migrated(b)
	pools, err := auth.NewTenantPools(url, 2)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = pools.Close() })
	ga, _, err := pools.For(ctx, "acme")
	if err != nil {
		b.Fatal(err)
	}
	gb, _, err := pools.For(ctx, "umbrella")
	if err != nil {
		b.Fatal(err)
	}
	for i := range 500 {
		for _, g := range []store.Store{ga, gb} {
			if _, err := session.New(ctx, g, session.User(fmt.Sprint("message ", i))); err != nil {
				b.Fatal(err)
			}
		}
	}
	for name, g := range map[string]store.Store{"system": sys, "tenant": ga} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, err := g.List(ctx, store.ListParams{Limit: 50, RootsOnly: true})
				if err != nil || len(p.Versions) != 50 {
					b.Fatalf("list: %d, %v", len(p.Versions), err)
				}
			}
		})
	}
}
