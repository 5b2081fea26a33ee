package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/pgstore"
	"github.com/rath-run/rath/pkg/store/storetest"
)

// TestPutWith: the caller's statements commit with the version or not at
// all, their rows are read back, and a replayed version runs none of them.
func TestPutWith(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t, pgstore.Options{})
	if _, err := st.Pool().Exec(ctx, `CREATE TABLE probe (version uuid PRIMARY KEY REFERENCES versions (id), note text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	probes := func() int {
		var n int
		if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM probe`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	root, err := session.FromUserMessage(ctx, st, "hi")
	if err != nil {
		t.Fatal(err)
	}

	// Commits together; the statement sees the version (its foreign key)
	// and its rows are scanned.
	step := storetest.Prepare(t, root, "step-1", session.Assistant("ok"))
	var note string
	got, ran, err := st.PutWith(ctx, step, pgstore.Stmt{
		SQL: `INSERT INTO probe (version, note) VALUES ($1, $2) RETURNING note`, Args: []any{step.ID, "first"},
		Scan: func(rows pgx.Rows) error {
			if !rows.Next() {
				return errors.New("no row returned")
			}
			return rows.Scan(&note)
		},
	})
	if err != nil || !ran || got.ID != step.ID || note != "first" || probes() != 1 {
		t.Fatalf("PutWith = %v, ran %v, %v, note %q, probes %d; want the version, ran, note first, 1 probe", got, ran, err, note, probes())
	}

	// A replay (same key, a fresh version) returns the committed version
	// and runs nothing.
	replay := storetest.Prepare(t, root, "step-1", session.Assistant("ok"))
	got, ran, err = st.PutWith(ctx, replay, pgstore.Stmt{SQL: `INSERT INTO probe (version, note) VALUES ($1, 'replay')`, Args: []any{replay.ID}})
	if err != nil || ran || got.ID != step.ID || probes() != 1 {
		t.Fatalf("replayed PutWith = %v, ran %v, %v, probes %d; want the first version, not ran, 1 probe", got, ran, err, probes())
	}

	// A failing statement rolls the version back with it, and its own
	// unique violation is not mistaken for a replay.
	for _, bad := range []pgstore.Stmt{
		{SQL: `SELECT 1 / 0`},
		{SQL: `INSERT INTO probe (version, note) VALUES ($1, 'dup')`, Args: []any{step.ID}},
	} {
		v := storetest.Prepare(t, root, "", session.Assistant("ok"))
		if _, _, err := st.PutWith(ctx, v, bad); err == nil {
			t.Fatalf("PutWith with %q: no error", bad.SQL)
		}
		if _, err := st.GetUncached(ctx, v.ID); !errors.Is(err, session.ErrNotFound) {
			t.Fatalf("version after a failed PutWith (%q): %v, want ErrNotFound", bad.SQL, err)
		}
	}
	if probes() != 1 {
		t.Fatalf("probes = %d after failed PutWiths, want 1", probes())
	}
}
