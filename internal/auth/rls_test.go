package auth_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rath-run/rath/internal/auth"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/pgstore"
)

// migrated returns a migrated Postgres store (system connections) and its URL.
func migrated(t testing.TB) (*pgstore.Store, string) {
	t.Helper()
	url := testdb.Postgres(t)
	st, err := pgstore.Open(context.Background(), url, pgstore.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st, url
}

func tenantOf(t *testing.T, pool *pgxpool.Pool, id session.ID) string {
	t.Helper()
	var tenant string
	if err := pool.QueryRow(context.Background(), `SELECT tenant FROM versions WHERE id = $1`, id).Scan(&tenant); err != nil {
		t.Fatalf("tenant of %s: %v", id, err)
	}
	return tenant
}

// TestRowLevelSecurityConfinesTenants checks, from tenant B's side, that the
// rows tenant A wrote are invisible to B's confined store (Get, Transcript,
// List, lineage), that B cannot extend or merge them, and that a worker's
// system connection committing a step on A's session writes it as A's.
func TestRowLevelSecurityConfinesTenants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sys, url := migrated(t)
	pools, err := auth.NewTenantPools(url, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pools.Close() })
	ga, ra, err := pools.For(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	gb, _, err := pools.For(ctx, "umbrella")
	if err != nil {
		t.Fatal(err)
	}
	if ra == nil {
		t.Fatal("no run store for tenant acme")
	}

	a, err := session.New(ctx, ga, session.System("acme's secret prompt"), session.User("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if got := tenantOf(t, sys.Pool(), a.ID()); got != "acme" {
		t.Fatalf("version made by acme's store has tenant %q", got)
	}
	// A worker (system connection) commits a step on A's session: the new
	// version inherits A's tenant from its base.
	onSys, err := session.Open(ctx, sys, a.ID())
	if err != nil {
		t.Fatal(err)
	}
	step, err := onSys.Append(ctx, session.Assistant("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if got := tenantOf(t, sys.Pool(), step.ID()); got != "acme" {
		t.Fatalf("step output on acme's session has tenant %q, want acme", got)
	}
	// Tenant A sees its own rows, through its confined store.
	if _, err := ga.Transcript(ctx, step.ID()); err != nil {
		t.Fatalf("acme reading its own step: %v", err)
	}

	// Tenant B, by id: nothing.
	if _, err := gb.Get(ctx, a.ID()); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("umbrella Get(acme's version) = %v, want ErrNotFound", err)
	}
	if _, err := gb.Transcript(ctx, step.ID()); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("umbrella Transcript(acme's version) = %v, want ErrNotFound", err)
	}
	if _, err := session.Open(ctx, gb, a.ID()); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("umbrella opening acme's session = %v, want ErrNotFound", err)
	}
	page, err := gb.List(ctx, pgListAll())
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Versions) != 0 {
		t.Errorf("umbrella lists %d versions, want 0", len(page.Versions))
	}
	var chunks, edges int
	bpool := gb.(*pgstore.Store).Pool()
	if err := bpool.QueryRow(ctx, `SELECT (SELECT count(*) FROM chunks), (SELECT count(*) FROM lineage)`).Scan(&chunks, &edges); err != nil {
		t.Fatal(err)
	}
	if chunks != 0 || edges != 0 {
		t.Errorf("umbrella's connection reads %d chunks and %d lineage edges of acme's, want 0 and 0", chunks, edges)
	}
	// B's own session cannot take A's as a merge parent: A's is not there.
	own, err := session.New(ctx, gb, session.User("umbrella's own"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := own.Merge(ctx, onSys); err == nil {
		t.Error("umbrella merged acme's session into its own")
	}
	if _, _, err := auth.NewStore(sqlDB(t, url), true).Create(ctx, auth.CreateParams{Tenant: "acme", Scope: auth.ScopeAdmin}); err != nil {
		t.Fatal(err)
	}
	// Even raw SQL on B's connection cannot write a row as A.
	if _, err := bpool.Exec(ctx, `INSERT INTO api_tokens (id, hash, tenant, scope, created_at) VALUES ('x', repeat('a', 64), 'acme', 'admin', now())`); err == nil {
		t.Error("a tenant connection inserted an api token")
	}
	var tokens int
	if err := bpool.QueryRow(ctx, `SELECT count(*) FROM api_tokens`).Scan(&tokens); err != nil {
		t.Fatal(err)
	}
	if tokens != 0 {
		t.Errorf("umbrella's connection reads %d api tokens, want 0", tokens)
	}
	// The system connection still sees everything.
	var all int
	if err := sys.Pool().QueryRow(ctx, `SELECT count(*) FROM versions`).Scan(&all); err != nil {
		t.Fatal(err)
	}
	if all != 3 {
		t.Errorf("system connection sees %d versions, want 3", all)
	}
}

// TestTenantPoolsFailClosed logs in as a role that cannot take
// rath_coordinator and bypasses row-level security (BYPASSRLS): its tenant
// pool is refused, not served unconfined.
func TestTenantPoolsFailClosed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, dbURL := migrated(t)
	sys := sqlDB(t, dbURL)
	probe := fmt.Sprintf("rath_probe_%d", time.Now().UnixNano())
	if _, err := sys.ExecContext(ctx, `CREATE ROLE `+probe+` LOGIN BYPASSRLS`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = sys.ExecContext(context.Background(), `DROP ROLE `+probe) })
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(probe)
	pools, err := auth.NewTenantPools(u.String(), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pools.Close() })
	_, _, err = pools.For(ctx, "acme")
	if err == nil || !strings.Contains(err.Error(), "not confined") {
		t.Fatalf("tenant pool of a BYPASSRLS login = %v, want refused as not confined", err)
	}
}
