package lineage_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/store/storeurl"
)

// graphTables are the tables scanned for a redacted secret: the Session
// Graph's rows and the redaction records.
var graphTables = []string{"versions", "chunks", "lineage", "redactions"}

// TestRedact removes a chunk's content on both stores, including the copy
// a merge stored: the secret is gone from every graph table, the chain
// still verifies (store.Verify and lineage.Verify), the redaction is
// listed, direct UPDATEs are still refused, and a marker set by hand
// without a recorded redaction is caught by verify.
func TestRedact(t *testing.T) {
	ctx := context.Background()
	urls := map[string]string{"sqlite": "sqlite:" + filepath.Join(t.TempDir(), "rath.db")}
	if !testing.Short() {
		urls["postgres"] = testdb.Postgres(t)
	}
	const secret = "sk-live-THE-SECRET-4242"
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
			s := func(v session.Session, err error) session.Session {
				t.Helper()
				return must[session.Session](t)(v, err)
			}
			call := session.ToolCall{ID: "call-1", Function: session.FunctionCall{Name: "login", Arguments: `{"key":"` + secret + `"}`}}
			root := s(session.New(ctx, st, session.User("log in with "+secret)))
			a := s(root.Append(ctx, session.Assistant("", call),
				session.ToolResultChunk(session.ToolResult{ToolCallID: "call-1", Name: "login", Content: `"ok"`})))
			branch := s(a.Fork(ctx))
			branch2 := s(branch.Append(ctx, session.Assistant("the branch says hi")))
			merged := s(a.Merge(ctx, branch2))
			top := s(merged.Append(ctx, session.User("thanks")))
			// A chunk stored by a merge too: the same content, appended on
			// both sides.
			dup := s(branch2.Append(ctx, session.User("again "+secret)))
			m2 := s(top.Merge(ctx, dup))
			hashes := map[session.ID]string{}
			for _, v := range []session.Session{root, a, branch, branch2, merged, top, dup, m2} {
				hashes[v.ID()] = v.Hash()
			}
			before := must[[]session.Chunk](t)(m2.Chunks(ctx)) // cached now
			if n := rowsHolding(ctx, t, ret, "chunks", secret); n < 4 {
				t.Fatalf("before redaction %d chunk rows hold the secret, want 4 (the scan finds nothing?)", n)
			}

			if _, err := ret.Redact(ctx, m2.ID(), 99, "x"); err == nil || !strings.Contains(err.Error(), "--chunk 99") {
				t.Errorf("redact past the end: %v", err)
			}
			if _, err := ret.Redact(ctx, m2.ID(), 0, " "); err == nil {
				t.Error("redact without a reason succeeded")
			}
			// Redact ord 0 (stored by root), the assistant's call (ord 1)
			// and the repeated user chunk wherever it is stored.
			var done []lineage.Redaction
			done = append(done, must[[]lineage.Redaction](t)(ret.Redact(ctx, m2.ID(), 0, "leaked key"))...)
			done = append(done, must[[]lineage.Redaction](t)(ret.Redact(ctx, top.ID(), 1, "leaked key"))...)
			dupOrd := -1
			for i, c := range before {
				if strings.HasPrefix(c.Text(), "again ") {
					dupOrd = i
				}
			}
			done = append(done, must[[]lineage.Redaction](t)(ret.Redact(ctx, m2.ID(), dupOrd, "leaked key"))...)
			if _, err := ret.Redact(ctx, m2.ID(), 0, "again"); !errors.Is(err, lineage.ErrAlreadyRedacted) {
				t.Errorf("second redaction: %v, want ErrAlreadyRedacted", err)
			}
			if len(done) < 4 { // root's row, a's assistant row, dup's row and m2's copy of it
				t.Fatalf("redacted rows %+v, want at least 4", done)
			}
			listed := must[[]lineage.Redaction](t)(ret.Redactions(ctx))
			if len(listed) != len(done) {
				t.Fatalf("listed %d redactions, did %d", len(listed), len(done))
			}
			for _, r := range listed {
				if r.Reason != "leaked key" || r.By == "" || r.At.IsZero() || len(r.Hash) != 64 {
					t.Errorf("redaction record %+v", r)
				}
			}

			// The secret is gone from every graph table.
			for _, table := range graphTables {
				if n := rowsHolding(ctx, t, ret, table, secret); n != 0 {
					t.Errorf("table %s: %d rows still hold the secret", table, n)
				}
			}

			// The redacting process drops its cache; then it reads the
			// redacted chunks, with their hashes.
			st.(interface{ PurgeCache() }).PurgeCache()
			after := must[[]session.Chunk](t)(s(session.Open(ctx, st, m2.ID())).Chunks(ctx))
			if len(after) != len(before) {
				t.Fatalf("transcript %d chunks, was %d", len(after), len(before))
			}
			for i := range after {
				if after[i].Hash() != before[i].Hash() {
					t.Errorf("chunk %d: hash %s, was %s", i, after[i].Hash(), before[i].Hash())
				}
				if strings.Contains(string(after[i].Payload()), secret) || strings.Contains(after[i].Text(), secret) {
					t.Errorf("chunk %d still holds the secret: %s", i, after[i].Payload())
				}
			}
			if !after[0].Redacted() || after[0].Text() != session.RedactedText || after[0].RedactionReason() != "leaked key" {
				t.Errorf("chunk 0: redacted=%v text=%q", after[0].Redacted(), after[0].Text())
			}
			if tc := after[1].ToolCalls(); len(tc) != 1 || tc[0].ID != "call-1" || tc[0].Function.Name != "login" {
				t.Errorf("redacted assistant lost its call: %+v", tc)
			}
			for id, h := range hashes {
				v := must[*session.Version](t)(st.(lineage.Uncached).GetUncached(ctx, id))
				if v.Hash != h {
					t.Errorf("version %s hash changed", id)
				}
			}

			// The chain verifies.
			rep, err := st.Verify(ctx)
			if err != nil {
				t.Fatalf("store verify after redaction: %v (%v)", err, rep.Problems)
			}
			lrep, err := lineage.Verify(ctx, st, m2.ID())
			if err != nil || lrep.Versions != 8 {
				t.Fatalf("lineage verify after redaction: %v (%+v)", err, lrep)
			}
			if ps := must[[]lineage.Problem](t)(ret.CheckRedactions(ctx)); len(ps) != 0 {
				t.Fatalf("check redactions: %v", ps)
			}

			// Direct UPDATEs are still refused, even to a valid marker.
			red, err := session.Redact(session.User("thanks"), "by hand")
			if err != nil {
				t.Fatal(err)
			}
			upd := `UPDATE chunks SET payload = $1 WHERE version_id = $2`
			if dialect == lineage.SQLite {
				upd = `UPDATE chunks SET payload = ? WHERE version_id = ?`
			}
			if _, err := db.ExecContext(ctx, upd, string(red.Payload()), top.ID().String()); err == nil || !strings.Contains(err.Error(), "append-only") {
				t.Errorf("direct UPDATE of a chunk: %v, want refused", err)
			}
			if _, err := db.ExecContext(ctx, `DELETE FROM redactions`); err == nil {
				t.Error("direct DELETE of redactions succeeded")
			}

			if dialect == lineage.Postgres {
				// rath_redact writes only the marker that means this row's
				// redaction: not another hash, not extra content.
				other, _ := session.Redact(session.User("something else"), "by hand")
				withText := strings.Replace(string(red.Payload()), `"reason"`, `"content":"smuggled","reason"`, 1)
				for _, m := range []string{string(other.Payload()), withText, `{"content":"thanks"}`} {
					_, err := db.ExecContext(ctx, `SELECT * FROM rath_redact($1, $2, 'by hand', $3)`, top.ID().String(), top.Len()-1, m)
					if err == nil || !strings.Contains(err.Error(), "is not the redaction") {
						t.Errorf("rath_redact with marker %s: %v, want refused", m, err)
					}
				}
			}

			// A marker set past the triggers without a recorded redaction
			// is caught.
			forge(ctx, t, db, dialect, string(red.Payload()), top.ID())
			if _, err := st.Verify(ctx); !errors.Is(err, session.ErrHashMismatch) || !strings.Contains(err.Error(), "no redactions row") {
				t.Errorf("store verify of a forged marker: %v", err)
			}
			ps := must[[]lineage.Problem](t)(ret.CheckRedactions(ctx))
			if len(ps) != 1 || ps[0].ID != top.ID() || ps[0].Table != "chunks" {
				t.Errorf("check redactions of a forged marker: %v", ps)
			}
		})
	}
}

// rowsHolding counts table's rows whose text form contains s.
func rowsHolding(ctx context.Context, t *testing.T, ret lineage.Retention, table, s string) int {
	t.Helper()
	q := "SELECT count(*) FROM " + table + " x WHERE strpos(CAST(x AS text), $1) > 0"
	if ret.Dialect == lineage.SQLite {
		q = sqliteRowScan(ctx, t, ret, table)
	}
	var n int
	if err := ret.DB.QueryRowContext(ctx, q, s).Scan(&n); err != nil {
		t.Fatalf("scan %s: %v", table, err)
	}
	return n
}

// sqliteRowScan returns a query counting table's rows whose columns,
// concatenated, contain ?1.
func sqliteRowScan(ctx context.Context, t *testing.T, ret lineage.Retention, table string) string {
	t.Helper()
	rows, err := ret.DB.QueryContext(ctx, "SELECT name FROM pragma_table_info('"+table+"')")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, "coalesce(CAST("+c+" AS TEXT), '')")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(cols) == 0 {
		t.Fatalf("table %s has no columns", table)
	}
	return "SELECT count(*) FROM " + table + " WHERE instr(" + strings.Join(cols, " || '|' || ") + ", ?) > 0"
}

// forge sets a marker on version id's chunk rows past the triggers, as a
// superuser could: Postgres with session_replication_role = replica,
// SQLite with the redaction's marker row (the triggers then let a marker
// that keeps the row's hash through) but no redactions row.
func forge(ctx context.Context, t *testing.T, db *sql.DB, dialect lineage.Dialect, marker string, id session.ID) {
	t.Helper()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	stmts := []string{
		"SET LOCAL session_replication_role = replica",
		"UPDATE chunks SET payload = $1 WHERE version_id = $2",
	}
	if dialect == lineage.SQLite {
		stmts = []string{
			"INSERT INTO rath_redact_running (token) VALUES (1)",
			"UPDATE chunks SET payload = ? WHERE version_id = ?",
			"DELETE FROM rath_redact_running",
		}
	}
	for _, q := range stmts {
		var args []any
		if strings.HasPrefix(q, "UPDATE") {
			args = []any{marker, id.String()}
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("forge: %s: %v", q, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}
