package sqlitestore_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/sqlitestore"
	"github.com/rath-run/rath/pkg/store/storetest"
)

func TestAppendOnlyTriggers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openFile(t, sqlitestore.Options{})
	root, err := session.FromUserMessage(ctx, st, "keep me")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.Fork(ctx); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`UPDATE versions SET op = 'append'`, `DELETE FROM versions`,
		`UPDATE chunks SET payload = '{"content":"changed"}'`, `DELETE FROM chunks`,
		`UPDATE lineage SET ordinal = 1`, `DELETE FROM lineage`,
	} {
		_, err := st.DB().ExecContext(ctx, q)
		if err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: got %v, want the append-only refusal", q, err)
		}
	}
	if _, err := st.Verify(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestForkWritesOneRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openFile(t, sqlitestore.Options{})
	chunks := make([]session.Chunk, 1200)
	for i := range chunks {
		chunks[i] = session.User("line")
	}
	s, err := session.New(ctx, st, chunks...)
	if err != nil {
		t.Fatal(err)
	}
	count := func() (v, c, l int) {
		if err := st.DB().QueryRowContext(ctx, `SELECT (SELECT count(*) FROM versions), (SELECT count(*) FROM chunks), (SELECT count(*) FROM lineage)`).Scan(&v, &c, &l); err != nil {
			t.Fatal(err)
		}
		return v, c, l
	}
	v0, c0, l0 := count()
	if _, err := s.Fork(ctx); err != nil {
		t.Fatal(err)
	}
	v1, c1, l1 := count()
	if v1-v0 != 1 || c1 != c0 || l1-l0 != 1 {
		t.Fatalf("fork wrote %d versions, %d chunks, %d edges; want 1, 0, 1", v1-v0, c1-c0, l1-l0)
	}
}

func TestMigrateTwiceAndConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rath.db")
	const n = 3
	stores := make([]*sqlitestore.Store, n)
	for i := range stores {
		s, err := sqlitestore.Open(ctx, path, sqlitestore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores[i] = s
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, s := range stores {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = s.Migrate(ctx) }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent migration %d: %v", i, err)
		}
	}
	s, err := session.FromUserMessage(ctx, stores[0], "after migrating")
	if err != nil {
		t.Fatal(err)
	}
	if err := stores[1].Migrate(ctx); err != nil {
		t.Fatalf("migrating again: %v", err)
	}
	if got, err := stores[2].Get(ctx, s.ID()); err != nil || got.Hash != s.Hash() {
		t.Fatalf("version after re-migrating: %v %v", got, err)
	}
}

// TestMigrateFromProcesses: separate processes migrating one new file at
// once all succeed; each migration is applied once.
func TestMigrateFromProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rath.db")
	storetest.RunHelpers(t, 3, helperMigrateEnv+"="+path)
	st, err := sqlitestore.Open(ctx, path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var applied, distinct int
	if err := st.DB().QueryRowContext(ctx, `SELECT count(*), count(DISTINCT version_id) FROM goose_db_version WHERE version_id > 0 AND is_applied`).Scan(&applied, &distinct); err != nil {
		t.Fatal(err)
	}
	if applied != distinct || applied < 5 {
		t.Fatalf("goose recorded %d applications of %d migrations, want each once and at least 5", applied, distinct)
	}
	if _, err := session.FromUserMessage(ctx, st, "migrated by others"); err != nil {
		t.Fatal(err)
	}
}

func TestUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openFile(t, sqlitestore.Options{})
	s, err := session.FromUserMessage(ctx, st, "x")
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, err := st.GetUncached(ctx, s.ID()); !errors.Is(err, session.ErrUnavailable) {
		t.Fatalf("get on a closed store = %v, want ErrUnavailable", err)
	}
	if _, err := s.Append(ctx, session.User("y")); !errors.Is(err, session.ErrUnavailable) {
		t.Fatalf("append on a closed store = %v, want ErrUnavailable", err)
	}
	// A path that cannot be a database.
	if _, err := sqlitestore.Open(ctx, "/proc/self/nope/rath.db", sqlitestore.Options{}); !errors.Is(err, session.ErrUnavailable) {
		t.Fatalf("open in an impossible directory = %v, want ErrUnavailable", err)
	}
}
