package auth_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/rath-run/rath/internal/auth"
	"github.com/rath-run/rath/migrations"
	"github.com/rath-run/rath/pkg/session"
)

// TestAuthMigrationDownAndUp rolls migration 00011 (and what follows it)
// back and applies it again on a database holding a tenant's rows: both
// directions succeed, rows keep their tenant when it comes back as the
// default, and the roles' creation is idempotent.
func TestAuthMigrationDownAndUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sys, url := migrated(t)
	pools, err := auth.NewTenantPools(url, 1)
	if err != nil {
		t.Fatal(err)
	}
	g, _, err := pools.For(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := session.New(ctx, g, session.User("before")); err != nil {
		t.Fatal(err)
	}
	if err := pools.Close(); err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDBFromPool(sys.Pool())
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.Postgres(), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 10); err != nil {
		t.Fatalf("down past 00011: %v", err)
	}
	var cols int
	if err := sys.Pool().QueryRow(ctx, `SELECT count(*) FROM information_schema.columns WHERE table_name = 'versions' AND column_name = 'tenant'`).Scan(&cols); err != nil || cols != 0 {
		t.Fatalf("versions.tenant after down: %d, %v", cols, err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up again: %v", err)
	}
	var n int
	if err := sys.Pool().QueryRow(ctx, `SELECT count(*) FROM versions WHERE tenant = 'default'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("versions in tenant default after down and up = %d, %v; want the 1 (tenants do not survive a rollback)", n, err)
	}
}
