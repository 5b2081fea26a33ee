package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/rath-run/rath/migrations"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/pgstore"
	"github.com/rath-run/rath/pkg/store/storetest"
)

// TestLanesMigration: a graph written before migration 00005 (simulated by
// migrating down past it and up again, which fills the lanes of the stored
// rows) reads back the same and keeps growing.
func TestLanesMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := pgstore.Open(ctx, newDB(t, false), pgstore.Options{Migrate: true, CachedVersions: -1, CachedTranscripts: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g := storetest.BuildBranchy(t, st)
	sqlDB := stdlib.OpenDBFromPool(st.Pool())
	defer sqlDB.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.Postgres(), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 4); err != nil {
		t.Fatalf("migrate down past the lanes: %v", err)
	}
	var cols int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM information_schema.columns WHERE table_name = 'versions' AND column_name IN ('lane', 'pos')`).Scan(&cols); err != nil || cols != 0 {
		t.Fatalf("after migrating down: %d lane columns, %v", cols, err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatalf("migrate up again: %v", err)
	}
	g.Check(t, st)
}

// TestVerifyFindsBadLanes: lanes are not hashed, so Verify checks them.
func TestVerifyFindsBadLanes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t, pgstore.Options{})
	root, err := session.FromUserMessage(ctx, st, "root")
	if err != nil {
		t.Fatal(err)
	}
	next, err := root.Append(ctx, session.Assistant("a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Verify(ctx); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`ALTER TABLE versions DISABLE TRIGGER versions_append_only`,
		`UPDATE versions SET pos = 7 WHERE id = '` + next.ID().String() + `'`,
	} {
		if _, err := st.Pool().Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := st.Verify(ctx)
	if !errors.Is(err, session.ErrHashMismatch) || len(rep.Problems) == 0 || !strings.Contains(rep.Problems[0], "lane") {
		t.Fatalf("verify of a moved lane position = %v %+v, want a lane problem", err, rep)
	}
}
