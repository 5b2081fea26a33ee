package cpustat_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/rath-run/rath/internal/cpustat"
	"github.com/rath-run/rath/internal/testdb"
)

// TestBackends: the test database's backends (the query's own at least)
// are read, and their CPU grows with work they do.
func TestBackends(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testdb.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(ctx) })
	before, ok := cpustat.Backends(ctx, conn)
	if !ok {
		t.Fatal("the backends' CPU could not be read (the test Postgres runs on this machine)")
	}
	if _, err := conn.Exec(ctx, `SELECT count(*) FROM generate_series(1, 3000000)`); err != nil {
		t.Fatal(err)
	}
	after, ok := cpustat.Backends(ctx, conn)
	if !ok || after <= before {
		t.Fatalf("backends' CPU %s → %s (%v) across a query of 3 million rows", before, after, ok)
	}
}
