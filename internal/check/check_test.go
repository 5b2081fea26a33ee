package check_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/check"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/storeurl"
)

// fixture is a small graph with every operation and one run whose step
// committed the way a worker does.
type fixture struct {
	url    string
	db     *sql.DB
	root   session.Session
	leaf   session.Session
	run    runs.Run
	stepID string
	output session.ID
}

func newFixture(t *testing.T, url string) *fixture {
	t.Helper()
	ctx := context.Background()
	st, err := storeurl.Open(ctx, url, storeurl.Options{Migrate: true, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	rs, db, err := runs.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	f := &fixture{url: url, db: db}
	must := func(s session.Session, err error) session.Session {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	f.root = must(session.New(ctx, st, session.System("be brief"), session.User("hello")))
	a := must(f.root.Append(ctx, session.Assistant("hi")))
	b := must(must(a.Fork(ctx)).Append(ctx, session.User("branch b")))
	c := must(a.Append(ctx, session.User("branch c")))
	m := must(b.Merge(ctx, c))
	f.leaf = must(m.Detach(ctx))

	f.run = runs.Run{ID: runs.NewRunID(), Queue: "default", Target: []byte(`{"name":"a","model":"scripted"}`), Input: m.ID()}
	if err := rs.Create(ctx, &f.run, []runs.Step{{Ordinal: 0, Input: m.ID()}}); err != nil {
		t.Fatal(err)
	}
	f.stepID = f.run.Steps[0].ID
	if _, err := rs.StartStep(ctx, f.stepID, "w1"); err != nil {
		t.Fatal(err)
	}
	out := must(m.Extend(ctx, session.Extension{Op: session.OpStep, Chunks: []session.Chunk{session.Assistant("done")},
		Producer: session.Producer{Run: f.run.ID, Step: f.stepID, Worker: "w1"}, Key: f.stepID}))
	f.output = out.ID()
	if _, err := rs.CommitStep(ctx, f.stepID, out.ID()); err != nil {
		t.Fatal(err)
	}
	return f
}

func run(t *testing.T, url string, opts check.Options) check.Report {
	t.Helper()
	rep, err := check.Run(context.Background(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// wantProblem asserts the report names invariant inv with a row containing
// row.
func wantProblem(t *testing.T, rep check.Report, inv, row string) {
	t.Helper()
	for _, p := range rep.Problems {
		if p.Invariant == inv && strings.Contains(p.Row, row) {
			return
		}
	}
	t.Fatalf("no %s problem naming %q in %+v", inv, row, rep.Problems)
}

// tamper runs statements on one connection with triggers (and foreign keys,
// which Postgres implements as triggers) off: a superuser rewriting rows.
func tamper(t *testing.T, db *sql.DB, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SET session_replication_role = replica`); err != nil {
		t.Fatal(err)
	}
	for _, q := range stmts {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := conn.ExecContext(ctx, `SET session_replication_role = DEFAULT`); err != nil {
		t.Fatal(err)
	}
}

func TestCleanGraph(t *testing.T) {
	t.Parallel()
	for name, url := range map[string]func(*testing.T) string{
		"sqlite":   func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "rath.db") },
		"postgres": func(t *testing.T) string { return testdb.Postgres(t) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, url(t))
			rep := run(t, f.url, check.Options{Settled: true})
			if !rep.OK() {
				t.Fatalf("clean graph reported: %+v", rep.Problems)
			}
			if rep.Versions != 8 || rep.Runs != 1 || rep.Steps != 1 || rep.Open != 0 {
				t.Fatalf("report counts %+v, want 8 versions, 1 run, 1 step, none open", rep)
			}
		})
	}
}

// TestViolations creates each class of violation in its own database and
// checks the checker names it.
func TestViolations(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// violate creates the violation; it returns the invariant and a row
		// fragment the report must name.
		violate func(t *testing.T, f *fixture) (inv, row string)
		opts    check.Options
	}{
		{"trigger disabled", func(t *testing.T, f *fixture) (string, string) {
			tamper(t, f.db, `ALTER TABLE chunks DISABLE TRIGGER chunks_append_only`)
			return check.AppendOnly, "chunks.chunks_append_only"
		}, check.Options{}},
		{"trigger dropped", func(t *testing.T, f *fixture) (string, string) {
			tamper(t, f.db, `DROP TRIGGER lineage_no_truncate ON lineage`)
			return check.AppendOnly, "table lineage"
		}, check.Options{}},
		{"chunk rewritten", func(t *testing.T, f *fixture) (string, string) {
			tamper(t, f.db, `UPDATE chunks SET payload = replace(payload, 'hello', 'HELLO') WHERE version_id = '`+f.root.ID().String()+`'`)
			return check.HashChain, f.root.ID().String()
		}, check.Options{}},
		{"version rewritten", func(t *testing.T, f *fixture) (string, string) {
			tamper(t, f.db, `UPDATE versions SET total_tokens = 999 WHERE id = '`+f.leaf.ID().String()+`'`)
			return check.HashChain, f.leaf.ID().String()
		}, check.Options{}},
		{"chunk deleted", func(t *testing.T, f *fixture) (string, string) {
			tamper(t, f.db, `DELETE FROM chunks WHERE version_id = '`+f.root.ID().String()+`' AND ord = 1`)
			return check.Structure, "version " + f.root.ID().String()
		}, check.Options{}},
		{"orphan chunk", func(t *testing.T, f *fixture) (string, string) {
			ghost := session.NewID().String()
			tamper(t, f.db, `INSERT INTO chunks (version_id, ord, kind, payload, hash, lane) VALUES ('`+ghost+`', 0, 'user', '{}', '`+strings.Repeat("0", 64)+`', '`+ghost+`')`)
			return check.Structure, "chunk (" + ghost
		}, check.Options{}},
		{"cycle", func(t *testing.T, f *fixture) (string, string) {
			// The root made a child of its own descendant.
			tamper(t, f.db, `INSERT INTO lineage (child_id, parent_id, ordinal, op) VALUES ('`+f.root.ID().String()+`', '`+f.output.String()+`', 0, 'step')`)
			return check.Acyclic, "version "
		}, check.Options{}},
		{"step committed twice", func(t *testing.T, f *fixture) (string, string) {
			// A commit without the idempotency key: a second version for the
			// same step, written through the ordinary API.
			ctx := context.Background()
			st, err := storeurl.Open(ctx, f.url, storeurl.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			in, err := session.Open(ctx, st, f.run.Input)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := in.Extend(ctx, session.Extension{Op: session.OpStep, Chunks: []session.Chunk{session.Assistant("again")},
				Producer: session.Producer{Run: f.run.ID, Step: f.stepID, Worker: "w2"}}); err != nil {
				t.Fatal(err)
			}
			return check.ExactlyOnce, "step " + f.stepID
		}, check.Options{}},
		{"committed step with a wrong output", func(t *testing.T, f *fixture) (string, string) {
			tamper(t, f.db, `UPDATE steps SET output_id = '`+f.leaf.ID().String()+`' WHERE id = '`+f.stepID+`'`)
			return check.ExactlyOnce, "step " + f.stepID
		}, check.Options{}},
		{"committed step adopting a version made elsewhere", func(t *testing.T, f *fixture) (string, string) {
			// A squatted key: the step's output is a version that does not
			// descend from its input.
			ctx := context.Background()
			st, err := storeurl.Open(ctx, f.url, storeurl.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			bait, err := session.FromUserMessage(ctx, st, "bait")
			if err != nil {
				t.Fatal(err)
			}
			tamper(t, f.db, `UPDATE steps SET output_id = '`+bait.ID().String()+`' WHERE id = '`+f.stepID+`'`)
			return check.Descent, "step " + f.stepID
		}, check.Options{}},
		{"committed version, failed step without a reason", func(t *testing.T, f *fixture) (string, string) {
			tamper(t, f.db, `UPDATE steps SET status = 'failed', error = '' WHERE id = '`+f.stepID+`'`)
			return check.ExactlyOnce, "step " + f.stepID
		}, check.Options{}},
		{"succeeded run with another output", func(t *testing.T, f *fixture) (string, string) {
			tamper(t, f.db, `UPDATE runs SET output_id = '`+f.run.Input.String()+`' WHERE id = '`+f.run.ID+`'`)
			return check.ExactlyOnce, "run " + f.run.ID
		}, check.Options{}},
		{"unsettled run", func(t *testing.T, f *fixture) (string, string) {
			tamper(t, f.db, `UPDATE runs SET status = 'running' WHERE id = '`+f.run.ID+`'`)
			return check.Settled, "run " + f.run.ID
		}, check.Options{Settled: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, testdb.Postgres(t))
			inv, row := tc.violate(t, f)
			wantProblem(t, run(t, f.url, tc.opts), inv, row)
		})
	}
}

// TestViolationsSQLite covers the embedded store's own trigger check and a
// rewritten row.
func TestViolationsSQLite(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "sqlite:"+filepath.Join(t.TempDir(), "rath.db"))
	for _, q := range []string{
		`DROP TRIGGER chunks_no_update`,
		`UPDATE chunks SET payload = replace(payload, 'hello', 'HELLO') WHERE version_id = '` + f.root.ID().String() + `'`,
	} {
		if _, err := f.db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	rep := run(t, f.url, check.Options{})
	wantProblem(t, rep, check.AppendOnly, "table chunks")
	wantProblem(t, rep, check.HashChain, f.root.ID().String())
	if err := rep.Err(); err == nil || !strings.Contains(err.Error(), "invariants violated") {
		t.Fatalf("Err() = %v", err)
	}
}

// TestRerunKeptSteps: a rerun's kept step (runs.Store.CreateRerun) commits
// no version of its own; it is exactly-once through the original run's
// step of the same key, and flagged when no such step committed its output.
func TestRerunKeptSteps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, testdb.Postgres(t))
	rs := runs.NewStore(f.db, nil)
	keep := func(key string) string {
		t.Helper()
		out := f.output
		r := runs.Run{ID: runs.NewRunID(), Kind: runs.KindWorkflow, Driver: runs.DriverCoordinator, Workflow: "steps: []", Queue: "default",
			Target: []byte(`{}`), Input: f.run.Input}
		if err := rs.CreateRerun(ctx, &r, []runs.Step{{Key: key, Ordinal: 0, Input: f.run.Input, Output: &out, Attempts: 1, Worker: "w1"}}); err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	keep("0")
	if rep := run(t, f.url, check.Options{}); !rep.OK() {
		t.Fatalf("a kept step reported: %+v", rep.Problems)
	}
	// The same output under another key was not committed by a step of
	// that key: flagged.
	bad := keep("1")
	wantProblem(t, run(t, f.url, check.Options{}), check.ExactlyOnce, "step "+bad+"/1")
}
