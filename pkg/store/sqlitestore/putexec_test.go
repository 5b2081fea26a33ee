package sqlitestore_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/sqlitestore"
)

// TestPutExec: the version and the caller's statements commit together;
// when the caller's statement fails neither is stored, and a version
// already stored is a conflict that runs nothing of the caller's.
func TestPutExec(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "rath.db"), sqlitestore.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.DB().ExecContext(ctx, `CREATE TABLE side (v TEXT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	side := func(id session.ID) func(context.Context, sqlitestore.Execer) error {
		return func(ctx context.Context, ex sqlitestore.Execer) error {
			_, err := ex.ExecContext(ctx, `INSERT INTO side (v) VALUES (?)`, id.String())
			return err
		}
	}
	count := func(id session.ID) int {
		t.Helper()
		var n int
		if err := st.DB().QueryRowContext(ctx, `SELECT count(*) FROM side WHERE v = ?`, id.String()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	v, err := session.Root(session.User("together"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutExec(ctx, v, side(v.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, v.ID); err != nil || count(v.ID) != 1 {
		t.Fatalf("after PutExec: get %v, side rows %d; want the version and one row", err, count(v.ID))
	}

	// The same version again: a conflict, the caller's statement not run.
	ran := false
	_, err = st.PutExec(ctx, v, func(context.Context, sqlitestore.Execer) error { ran = true; return nil })
	if !errors.Is(err, session.ErrConflict) || ran {
		t.Fatalf("PutExec of a stored version = %v (after ran: %v), want ErrConflict without running after", err, ran)
	}

	// The caller's statement fails (the side row exists): nothing stored.
	w, err := session.Root(session.User("rolled back"))
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	_, err = st.PutExec(ctx, w, func(ctx context.Context, ex sqlitestore.Execer) error {
		if err := side(w.ID)(ctx, ex); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("PutExec with failing after = %v, want boom", err)
	}
	if _, err := st.Get(ctx, w.ID); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("version after a failed PutExec: %v, want ErrNotFound (not stored, not cached)", err)
	}
	if n := count(w.ID); n != 0 {
		t.Fatalf("side rows after a failed PutExec: %d, want 0", n)
	}
	// And it can still be stored afterwards.
	if _, err := st.PutExec(ctx, w, side(w.ID)); err != nil {
		t.Fatal(err)
	}
}
