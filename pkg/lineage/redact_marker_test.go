package lineage_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/migrations"
	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/store/storeurl"
)

// TestForgedRedactionMarker attacks what a redaction marker states beyond
// the hash (migration 00017). Honest redactions of a tool call and its
// result verify; then the database's owner rewrites both markers' tool
// names and call ids past the triggers, and the store's Verify and
// CheckRedactions name both chunk rows. On Postgres, a member of
// rath_redact writing a false marker by hand (the triggers on) is refused.
func TestForgedRedactionMarker(t *testing.T) {
	ctx := context.Background()
	urls := map[string]string{"sqlite": "sqlite:" + filepath.Join(t.TempDir(), "rath.db")}
	if !testing.Short() {
		urls["postgres"] = testdb.Postgres(t)
	}
	for name, url := range urls {
		t.Run(name, func(t *testing.T) {
			st := must[store.Store](t)(storeurl.Open(ctx, url, storeurl.Options{Migrate: true, Create: true}))
			t.Cleanup(func() { st.Close() })
			_, db, err := runs.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			dialect := must[lineage.Dialect](t)(lineage.DialectOf(url))
			ret := lineage.Retention{DB: db, Dialect: dialect}
			root := must[session.Session](t)(session.New(ctx, st, session.User("pay the invoice")))
			s := must[session.Session](t)(root.Append(ctx,
				session.Assistant("", session.ToolCall{ID: "call_pay", Function: session.FunctionCall{Name: "wire_transfer", Arguments: `{"iban":"DE00"}`}}),
				session.ToolResultChunk(session.ToolResult{ToolCallID: "call_pay", Name: "wire_transfer", Content: `{"ok":true}`})))
			// Another untouched session holding an unredacted tool call, for
			// the by-hand attempt below.
			other := must[session.Session](t)(root.Append(ctx,
				session.Assistant("", session.ToolCall{ID: "call_x", Function: session.FunctionCall{Name: "delete_all", Arguments: `{}`}})))
			for _, ord := range []int{1, 2} {
				if _, err := ret.Redact(ctx, s.ID(), ord, "bank details"); err != nil {
					t.Fatalf("redact chunk %d: %v", ord, err)
				}
			}
			if rep, err := st.Verify(ctx); err != nil {
				t.Fatalf("verify after honest redactions: %v (%v)", err, rep.Problems)
			}
			if ps := must[[]lineage.Problem](t)(ret.CheckRedactions(ctx)); len(ps) != 0 {
				t.Fatalf("check redactions after honest redactions: %v", ps)
			}

			if dialect == lineage.Postgres {
				// A member of rath_redact (here a superuser taking the role)
				// writing a marker by hand, the triggers on: a false tool
				// name is refused, and so is rewriting a marker.
				for _, tc := range []struct{ what, version string }{
					{"a false marker over content", other.ID().String()},
					{"a marker over a marker", s.ID().String()},
				} {
					tx, err := db.BeginTx(ctx, nil)
					if err != nil {
						t.Fatal(err)
					}
					_, err = tx.ExecContext(ctx, `SET LOCAL ROLE rath_redact`)
					if err == nil {
						_, err = tx.ExecContext(ctx, `UPDATE chunks SET payload = $1 WHERE version_id = $2 AND ord = 1`,
							`{"rath_redacted":{"hash":"`+chunkHash(ctx, t, st, tc.version, 1)+`","reason":"x","tool_calls":[{"function":{"arguments":"{}","name":"get_weather"},"id":"call_wx","type":"function"}]}}`,
							tc.version)
					}
					_ = tx.Rollback()
					if err == nil || !strings.Contains(err.Error(), "rath:") {
						t.Errorf("%s as rath_redact: %v, want refused", tc.what, err)
					}
				}
			}

			forgeFields(ctx, t, db, dialect)
			rep, err := st.Verify(ctx)
			if !errors.Is(err, session.ErrHashMismatch) {
				t.Fatalf("verify after forging the markers: %v (%v), want a hash mismatch", err, rep.Problems)
			}
			for _, ord := range []string{"chunk 1:", "chunk 2:"} {
				want := "version " + s.ID().String() + ": " + ord
				if !strings.Contains(strings.Join(rep.Problems, "\n"), want) {
					t.Errorf("verify does not name %q: %v", want, rep.Problems)
				}
			}
			ps := must[[]lineage.Problem](t)(ret.CheckRedactions(ctx))
			if len(ps) != 2 || ps[0].ID != s.ID() || ps[0].Ord != 1 || ps[1].Ord != 2 || !strings.Contains(ps[0].Detail, "not the one recorded") {
				t.Errorf("check redactions after forging: %v", ps)
			}
		})
	}
}

// chunkHash returns the hash of chunk ord of version id's transcript.
func chunkHash(ctx context.Context, t *testing.T, st store.Store, id string, ord int) string {
	t.Helper()
	vid, err := session.ParseID(id)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := st.Transcript(ctx, vid)
	if err != nil {
		t.Fatal(err)
	}
	return cs[ord].Hash()
}

// forgeFields rewrites every redaction marker's tool names and call ids
// past the triggers, as the database's owner can: on Postgres with the
// triggers off, on SQLite by playing Redact's own marker row.
func forgeFields(ctx context.Context, t *testing.T, db *sql.DB, dialect lineage.Dialect) {
	t.Helper()
	const set = `UPDATE chunks SET payload = replace(replace(payload, 'wire_transfer', 'get_weather'), 'call_pay', 'call_wx') WHERE `
	stmts := []string{
		"SET LOCAL session_replication_role = replica",
		set + `starts_with(payload, '{"rath_redacted":')`,
	}
	if dialect == lineage.SQLite {
		stmts = []string{
			"INSERT INTO rath_redact_running (token) VALUES (1)",
			set + `substr(payload, 1, 17) = '{"rath_redacted":'`,
			"DELETE FROM rath_redact_running",
		}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	for _, q := range stmts {
		res, err := tx.ExecContext(ctx, q)
		if err != nil {
			t.Fatalf("forge: %s: %v", q, err)
		}
		if n, _ := res.RowsAffected(); strings.HasPrefix(q, "UPDATE") && n != 2 {
			t.Fatalf("forge: %d rows changed, want 2", n)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestRedactionMarkersBackfilled redacts on a Postgres schema before
// migration 00017, then migrates: the markers that existed are recorded as
// they stood, so the store still verifies, and a marker forged afterwards
// is reported.
func TestRedactionMarkersBackfilled(t *testing.T) {
	ctx := context.Background()
	url := testdb.Postgres(t)
	_, db, err := runs.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.Postgres(), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 16); err != nil {
		t.Fatalf("migrate to 00016: %v", err)
	}
	st := must[store.Store](t)(storeurl.Open(ctx, url, storeurl.Options{}))
	t.Cleanup(func() { st.Close() })
	ret := lineage.Retention{DB: db, Dialect: lineage.Postgres}
	root := must[session.Session](t)(session.New(ctx, st, session.User("pay the invoice")))
	s := must[session.Session](t)(root.Append(ctx,
		session.Assistant("", session.ToolCall{ID: "call_pay", Function: session.FunctionCall{Name: "wire_transfer", Arguments: `{"iban":"DE00"}`}}),
		session.ToolResultChunk(session.ToolResult{ToolCallID: "call_pay", Name: "wire_transfer", Content: `{"ok":true}`})))
	for _, ord := range []int{1, 2} {
		if _, err := ret.Redact(ctx, s.ID(), ord, "bank details"); err != nil {
			t.Fatalf("redact chunk %d before 00017: %v", ord, err)
		}
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("migrate to the latest: %v", err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM redaction_markers`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("redaction_markers after 00017: %d rows (%v), want 2", n, err)
	}
	if rep, err := st.Verify(ctx); err != nil {
		t.Fatalf("verify after 00017: %v (%v)", err, rep.Problems)
	}
	forgeFields(ctx, t, db, lineage.Postgres)
	if rep, err := st.Verify(ctx); !errors.Is(err, session.ErrHashMismatch) || len(rep.Problems) != 2 {
		t.Errorf("verify of forged markers after 00017: %v (%v)", err, rep.Problems)
	}
}
