package lineage_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/store/storeurl"
)

// TestGC prunes branches nothing keeps on both stores: pins, a run's input
// and its step's input keep their ancestry; the rest goes, the report says
// exactly what went, and what stays still verifies.
func TestGC(t *testing.T) {
	ctx := context.Background()
	urls := map[string]string{"sqlite": "sqlite:" + filepath.Join(t.TempDir(), "rath.db")}
	if !testing.Short() {
		urls["postgres"] = testdb.Postgres(t)
	}
	for name, url := range urls {
		t.Run(name, func(t *testing.T) {
			st := must[store.Store](t)(storeurl.Open(ctx, url, storeurl.Options{Migrate: true, Create: true}))
			t.Cleanup(func() { st.Close() })
			rs, db, err := runs.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			dialect := must[lineage.Dialect](t)(lineage.DialectOf(url))
			ret := lineage.Retention{DB: db, Dialect: dialect}

			s := func(v session.Session, err error) session.Session {
				t.Helper()
				return must[session.Session](t)(v, err)
			}
			root := s(session.New(ctx, st, session.User("root")))
			a := s(root.Append(ctx, session.Assistant("a")))
			a2 := s(a.Append(ctx, session.User("a2")))
			b := s(root.Fork(ctx))
			b2 := s(b.Append(ctx, session.Assistant("b2 is a long answer nobody keeps")))
			c := s(root.Fork(ctx))
			c2 := s(c.Append(ctx, session.Assistant("c2")))
			runID := runs.NewRunID()
			if err := rs.Create(ctx, &runs.Run{ID: runID, Queue: "default", Target: json.RawMessage(`{}`), Input: c.ID()},
				[]runs.Step{{ID: runs.StepID(runID, 0), RunID: runID, Ordinal: 0, Input: c2.ID()}}); err != nil {
				t.Fatal(err)
			}
			// A memory item written by d2 keeps d2 and its ancestry.
			d := s(root.Fork(ctx))
			d2 := s(d.Append(ctx, session.Assistant("d2 wrote a memo")))
			ins := `INSERT INTO memory_items (namespace, uri, text, metadata, dl, version_id, created_at, updated_at)
				VALUES ('agent', 'memory://memo/1', 'a memo', '{}', 2, $1, 0, 0)`
			if dialect == lineage.SQLite {
				ins = strings.Replace(ins, "$1", "?", 1)
			}
			if _, err := db.ExecContext(ctx, ins, d2.ID().String()); err != nil {
				t.Fatal(err)
			}
			if err := ret.Pin(ctx, a2.ID(), "keep the a branch"); err != nil {
				t.Fatal(err)
			}
			if err := ret.Pin(ctx, session.NewID(), ""); !errors.Is(err, session.ErrNotFound) {
				t.Errorf("pin of an unknown version: %v, want ErrNotFound", err)
			}

			// Nothing is old enough yet.
			if rep := must[lineage.GCReport](t)(ret.GC(ctx, time.Now().Add(-time.Hour), false)); rep.Versions != 0 {
				t.Fatalf("gc with a one-hour horizon freed %+v", rep)
			}
			horizon := time.Now().Add(time.Second)
			dry := must[lineage.GCReport](t)(ret.GC(ctx, horizon, true))
			if dry.Versions != 2 || dry.Chunks != 1 || dry.Edges != 2 || dry.Bytes <= int64(len("b2 is a long answer nobody keeps")) || !dry.DryRun {
				t.Fatalf("dry run = %+v, want b and b2: 2 versions, 1 chunk, 2 edges", dry)
			}
			rep := must[lineage.GCReport](t)(ret.GC(ctx, horizon, false))
			if rep.Versions != dry.Versions || rep.Chunks != dry.Chunks || rep.Edges != dry.Edges || rep.Bytes != dry.Bytes {
				t.Fatalf("gc = %+v, dry run said %+v", rep, dry)
			}
			u := st.(lineage.Uncached)
			for _, gone := range []session.Session{b, b2} {
				if _, err := u.GetUncached(ctx, gone.ID()); !errors.Is(err, session.ErrNotFound) {
					t.Errorf("%s survived gc: %v", gone.ID(), err)
				}
			}
			for _, kept := range []session.Session{root, a, a2, c, c2, d, d2} {
				if _, err := u.GetUncached(ctx, kept.ID()); err != nil {
					t.Errorf("gc removed %s, which a pin or a run reaches: %v", kept.ID(), err)
				}
			}
			if _, err := lineage.Verify(ctx, st, a2.ID()); err != nil {
				t.Errorf("kept ancestry does not verify: %v", err)
			}
			if vr, err := st.Verify(ctx); err != nil {
				t.Errorf("store does not verify after gc: %v %v", err, vr.Problems)
			}
			if rep := must[lineage.GCReport](t)(ret.GC(ctx, horizon, false)); rep.Versions+rep.Chunks+rep.Edges+rep.Bytes != 0 {
				t.Errorf("second gc freed %+v", rep)
			}

			// The application's own connection still cannot delete.
			q := `DELETE FROM versions WHERE id = $1`
			if dialect == lineage.SQLite {
				q = `DELETE FROM versions WHERE id = ?`
			}
			if _, err := db.ExecContext(ctx, q, a.ID().String()); err == nil {
				t.Fatal("a direct DELETE on versions was allowed")
			}

			pins := must[[]lineage.Pin](t)(ret.Pins(ctx))
			if len(pins) != 1 || pins[0].ID != a2.ID() || pins[0].Note != "keep the a branch" {
				t.Errorf("pins = %+v", pins)
			}
			if err := ret.Unpin(ctx, a2.ID()); err != nil {
				t.Fatal(err)
			}
			if err := ret.Unpin(ctx, a2.ID()); !errors.Is(err, lineage.ErrNotPinned) {
				t.Errorf("second unpin: %v, want ErrNotPinned", err)
			}
			rep = must[lineage.GCReport](t)(ret.GC(ctx, horizon, false))
			if rep.Versions != 2 || rep.Chunks != 2 || rep.Edges != 2 {
				t.Errorf("gc after unpin = %+v, want a and a2", rep)
			}
			if _, err := u.GetUncached(ctx, root.ID()); err != nil {
				t.Errorf("root (the run's input's parent) was removed: %v", err)
			}
		})
	}
}
