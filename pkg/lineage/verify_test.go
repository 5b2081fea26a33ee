package lineage_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite" // database/sql driver "sqlite", to tamper with the file

	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/store/pgstore"
	"github.com/rath-run/rath/pkg/store/sqlitestore"
)

// tamperer runs SQL past the append-only triggers, as a superuser could.
type tamperer func(t *testing.T, stmts ...string)

// tamperStores returns stores with a way to change their rows directly:
// Postgres with session_replication_role = replica (triggers off for the
// session), SQLite with the triggers dropped.
func tamperStores(t *testing.T) map[string]struct {
	st     store.Store
	tamper tamperer
} {
	t.Helper()
	ctx := context.Background()
	out := map[string]struct {
		st     store.Store
		tamper tamperer
	}{}
	path := filepath.Join(t.TempDir(), "rath.db")
	sq, err := sqlitestore.Open(ctx, path, sqlitestore.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, tr := range []string{"versions_no_update", "versions_no_delete", "chunks_no_update", "chunks_no_delete", "lineage_no_update", "lineage_no_delete"} {
		if _, err := db.ExecContext(ctx, "DROP TRIGGER "+tr); err != nil {
			t.Fatalf("drop trigger %s: %v", tr, err)
		}
	}
	out["sqlite"] = struct {
		st     store.Store
		tamper tamperer
	}{sq, func(t *testing.T, stmts ...string) {
		t.Helper()
		for _, s := range stmts {
			if _, err := db.ExecContext(ctx, s); err != nil {
				t.Fatalf("tamper %q: %v", s, err)
			}
		}
	}}
	if testing.Short() {
		return out
	}
	pg, err := pgstore.Open(ctx, testdb.Postgres(t), pgstore.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	out["postgres"] = struct {
		st     store.Store
		tamper tamperer
	}{pg, func(t *testing.T, stmts ...string) {
		t.Helper()
		conn, err := pg.Pool().Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := tx.Exec(ctx, "SET LOCAL session_replication_role = replica"); err != nil {
			t.Fatal(err)
		}
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				t.Fatalf("tamper %q: %v", s, err)
			}
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}}
	return out
}

// TestVerifyCatchesTampering changes stored rows one class at a time and
// checks Verify names the row (or the version whose hash it breaks).
func TestVerifyCatchesTampering(t *testing.T) {
	ctx := context.Background()
	for name, ts := range tamperStores(t) {
		t.Run(name, func(t *testing.T) {
			st := ts.st
			q := func(id session.ID) string { return "'" + id.String() + "'" }
			type tcase struct {
				name   string
				stmts  func(f runFixture) []string
				table  string
				column string
				who    func(f runFixture) session.ID
			}
			cases := []tcase{
				{"chunk payload edited", func(f runFixture) []string {
					return []string{fmt.Sprintf(`UPDATE chunks SET payload = '{"content":"by car","tool_calls":null}' WHERE version_id = %s`, q(f.b1.ID()))}
				}, "versions", "hash", func(f runFixture) session.ID { return f.b1.ID() }},
				{"chunk payload not canonical", func(f runFixture) []string {
					return []string{fmt.Sprintf(`UPDATE chunks SET payload = '{"tool_calls":null,"content":"by bus"}' WHERE version_id = %s`, q(f.b1.ID()))}
				}, "chunks", "payload", func(f runFixture) session.ID { return f.b1.ID() }},
				{"chunks reordered", func(f runFixture) []string {
					a, s := q(f.a1.ID()), f.plan.Len()
					return []string{
						fmt.Sprintf(`UPDATE chunks SET ord = 1000 WHERE version_id = %s AND ord = %d`, a, s),
						fmt.Sprintf(`UPDATE chunks SET ord = %d WHERE version_id = %s AND ord = %d`, s, a, s+2),
						fmt.Sprintf(`UPDATE chunks SET ord = %d WHERE version_id = %s AND ord = 1000`, s+2, a),
					}
				}, "versions", "hash", func(f runFixture) session.ID { return f.a1.ID() }},
				{"chunk deleted", func(f runFixture) []string {
					return []string{fmt.Sprintf(`DELETE FROM chunks WHERE version_id = %s AND ord = %d`, q(f.a1.ID()), f.plan.Len()+1)}
				}, "chunks", "version_id", func(f runFixture) session.ID { return f.a1.ID() }},
				{"chunk inserted", func(f runFixture) []string {
					return []string{fmt.Sprintf(`INSERT INTO chunks (version_id, lane, ord, kind, payload, hash)
						SELECT id, lane, 1000, 'user', '{"content":"smuggled"}', '%s' FROM versions WHERE id = %s`,
						session.User("smuggled").Hash(), q(f.a1.ID()))}
				}, "chunks", "version_id", func(f runFixture) session.ID { return f.a1.ID() }},
				{"op edited", func(f runFixture) []string {
					return []string{fmt.Sprintf(`UPDATE versions SET op = 'append' WHERE id = %s`, q(f.a1.ID()))}
				}, "versions", "hash", func(f runFixture) session.ID { return f.a1.ID() }},
				{"usage edited", func(f runFixture) []string {
					return []string{fmt.Sprintf(`UPDATE versions SET total_tokens = 1 WHERE id = %s`, q(f.sel.ID()))}
				}, "versions", "hash", func(f runFixture) session.ID { return f.sel.ID() }},
				{"producer edited", func(f runFixture) []string {
					return []string{fmt.Sprintf(`UPDATE versions SET agent = 'mallory' WHERE id = %s`, q(f.final.ID()))}
				}, "versions", "hash", func(f runFixture) session.ID { return f.final.ID() }},
				{"placement edited", func(f runFixture) []string {
					return []string{fmt.Sprintf(`UPDATE versions SET placement = '{"backend":"docker"}' WHERE id = %s`, q(f.a1.ID()))}
				}, "versions", "hash", func(f runFixture) session.ID { return f.a1.ID() }},
				{"parent edge changed", func(f runFixture) []string {
					return []string{fmt.Sprintf(`UPDATE lineage SET parent_id = %s WHERE child_id = %s AND ordinal = 1`, q(f.c1.ID()), q(f.merge.ID()))}
				}, "versions", "hash", func(f runFixture) session.ID { return f.merge.ID() }},
				{"parent edge removed", func(f runFixture) []string {
					return []string{fmt.Sprintf(`DELETE FROM lineage WHERE child_id = %s AND ordinal = 1`, q(f.merge.ID()))}
				}, "versions", "", func(f runFixture) session.ID { return f.merge.ID() }},
				{"version hash edited", func(f runFixture) []string {
					return []string{fmt.Sprintf(`UPDATE versions SET hash = '%s' WHERE id = %s`, strings.Repeat("0", 64), q(f.plan.ID()))}
				}, "versions", "hash", func(f runFixture) session.ID { return f.plan.ID() }},
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					f := buildRun(t, st)
					if rep, err := lineage.Verify(ctx, st, f.final.ID()); err != nil || rep.Versions != 11 {
						t.Fatalf("before tampering: %+v %v", rep, err)
					}
					ts.tamper(t, c.stmts(f)...)
					rep, err := lineage.Verify(ctx, st, f.final.ID())
					if !errors.Is(err, session.ErrHashMismatch) {
						t.Fatalf("verify after %s: %v, want ErrHashMismatch", c.name, err)
					}
					found := false
					for _, p := range rep.Problems {
						if p.ID == c.who(f) && p.Table == c.table && (c.column == "" || p.Column == c.column) {
							found = true
						}
					}
					if !found {
						t.Errorf("after %s: problems %v do not name %s row of %s (column %q)", c.name, rep.Problems, c.table, c.who(f), c.column)
					}
					// The versions the tampering does not reach still verify.
					if _, err := lineage.Verify(ctx, st, f.c1.ID()); err != nil && c.who(f) != f.plan.ID() {
						t.Errorf("c1 does not descend from the tampered row but: %v", err)
					}
				})
			}

			t.Run("chunk hash column edited", func(t *testing.T) {
				f := buildRun(t, st)
				ts.tamper(t, fmt.Sprintf(`UPDATE chunks SET hash = '%s' WHERE version_id = %s`, strings.Repeat("1", 64), q(f.b1.ID())))
				rep, err := st.Verify(ctx)
				named := false
				for _, p := range rep.Problems {
					named = named || strings.Contains(p, f.b1.ID().String()+": chunk")
				}
				if !errors.Is(err, session.ErrHashMismatch) || !named {
					t.Errorf("store verify after editing chunks.hash: %v %v", err, rep.Problems)
				}
			})
		})
	}
}
