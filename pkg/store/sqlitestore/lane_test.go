package sqlitestore_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/rath-run/rath/migrations"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/sqlitestore"
	"github.com/rath-run/rath/pkg/store/storetest"
)

// TestLanesMigration: a graph written before migration 00005 (simulated by
// migrating down past it and up again, which rebuilds the chunks table and
// fills the lanes of the stored rows) reads back the same and keeps growing.
func TestLanesMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "rath.db"), sqlitestore.Options{Migrate: true, CachedVersions: -1, CachedTranscripts: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g := storetest.BuildBranchy(t, st)
	p, err := goose.NewProvider(goose.DialectSQLite3, st.DB(), migrations.SQLite(), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 4); err != nil {
		t.Fatalf("migrate down past the lanes: %v", err)
	}
	var cols int
	if err := st.DB().QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('chunks') WHERE name = 'lane'`).Scan(&cols); err != nil || cols != 0 {
		t.Fatalf("after migrating down: %d lane columns, %v", cols, err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatalf("migrate up again: %v", err)
	}
	g.Check(t, st)
	// The rebuilt table is still append-only.
	for _, q := range []string{`UPDATE chunks SET kind = 'user'`, `DELETE FROM chunks`, `UPDATE versions SET pos = 9`} {
		if _, err := st.DB().ExecContext(ctx, q); err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s after the migration: %v, want the append-only refusal", q, err)
		}
	}
}

// TestVerifyFindsBadLanes: lanes are not hashed, so Verify checks them.
func TestVerifyFindsBadLanes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openFile(t, sqlitestore.Options{})
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
		`DROP TRIGGER versions_no_update`,
		`UPDATE versions SET pos = 7 WHERE id = '` + next.ID().String() + `'`,
	} {
		if _, err := st.DB().ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := st.Verify(ctx)
	if !errors.Is(err, session.ErrHashMismatch) || len(rep.Problems) == 0 || !strings.Contains(rep.Problems[0], "lane") {
		t.Fatalf("verify of a moved lane position = %v %+v, want a lane problem", err, rep)
	}
}
