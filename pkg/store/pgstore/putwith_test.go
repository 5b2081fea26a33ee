package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/pgstore"
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
	step := extension(t, root, "step-1")
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
	replay := extension(t, root, "step-1")
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
		v := extension(t, root, "")
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

// extension builds (without committing) a step version on s with key.
func extension(t *testing.T, s session.Session, key string) *session.Version {
	t.Helper()
	var v *session.Version
	capture := captureGraph{Graph: s.Graph(), put: func(x *session.Version) { v = x }}
	if _, err := session.Wrap(capture, s.Version()).Extend(context.Background(), session.Extension{
		Op: session.OpStep, Chunks: []session.Chunk{session.Assistant("ok")}, Key: key,
	}); err != nil {
		t.Fatal(err)
	}
	return v
}

// captureGraph records the version put into it instead of committing it.
type captureGraph struct {
	session.Graph
	put func(*session.Version)
}

func (g captureGraph) Put(_ context.Context, v *session.Version) (*session.Version, error) {
	g.put(v)
	return v, nil
}
