package runs

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rath-run/rath/internal/testdb"
)

// TestRewritesAddNoIndexEntries: on Postgres a step's start, its
// heartbeats and its commit rewrite its row without adding an entry to any
// index of steps, and the start rewrites the run's row (pending to
// running) without adding one to any index of runs (HOT updates), so an
// open step or run costs its indexes one entry each however often it is
// rewritten (migrations 00025 and 00026). With steps_open_idx and
// runs_status_idx, whose keys the rewrites change, every rewrite added an
// entry to every index.
func TestRewritesAddNoIndexEntries(t *testing.T) {
	ctx := context.Background()
	s, _, conn, input := openRunStore(t)
	output := uuid.New()
	insertRoot(t, conn, output)
	deadline := time.Now().Add(time.Hour)
	r := createRun(t, s, input, 1, &deadline)
	stepID := r.Steps[0].ID
	if _, err := s.StartStep(ctx, stepID, "w1"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := s.Touch(ctx, stepID); err != nil {
			t.Fatal(err)
		}
	}
	var status string
	if err := conn.QueryRow(ctx, `SELECT status FROM runs WHERE id = $1`, r.ID).Scan(&status); err != nil || status != "running" {
		t.Fatalf("run %s: status %q, %v; want running", r.ID, status, err)
	}
	checkEntries(t, conn, "runs", "a run whose step started")
	if _, err := s.CommitStep(ctx, stepID, output); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT status FROM steps WHERE id = $1`, stepID).Scan(&status); err != nil || status != "committed" {
		t.Fatalf("step %s: status %q, %v; want committed", stepID, status, err)
	}
	checkEntries(t, conn, "steps", "a step started, touched three times and committed")
}

// checkEntries fails t unless each index of table holds one entry, live
// or dead, read from its leaf pages (pageinspect: the test server's user
// is a superuser). The table holds one row.
func checkEntries(t *testing.T, conn *pgx.Conn, table, what string) {
	t.Helper()
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pageinspect`); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, `SELECT i.indexrelid::regclass::text,
		(SELECT coalesce(sum(p.live_items + p.dead_items), 0)
		   FROM generate_series(1, pg_relation_size(i.indexrelid) / current_setting('block_size')::int - 1) b,
		        bt_page_stats(i.indexrelid::regclass::text, b) p
		  WHERE p.type = 'l')
		FROM pg_index i WHERE i.indrelid = $1::regclass ORDER BY 1`, table)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		Index   string
		Entries int64
	}])
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 {
		t.Fatalf("%s has no index", table)
	}
	for _, e := range entries {
		if e.Entries != 1 {
			t.Errorf("index %s holds %d entries for %s; want 1", e.Index, e.Entries, what)
		}
	}
}

// TestOpenRunsByState: the reconciler's search for stale steps finds a step
// of an open run that nobody touched, not one whose run has ended (its
// start would refuse it); it, the deadline's and the drivers' searches
// for open runs, and the listing by status read their rows by index, not
// by scanning runs or steps, in a store full of ended runs.
func TestOpenRunsByState(t *testing.T) {
	ctx := context.Background()
	s, _, conn, input := openRunStore(t)
	open := createRun(t, s, input, 1, nil)
	ended := createRun(t, s, input, 1, nil)
	// A run that ended with its step open: a workflow run completed before
	// Complete canceled the steps its driver left unfinished.
	if _, err := conn.Exec(ctx, `UPDATE runs SET status = 'succeeded' WHERE id = $1`, ended.ID); err != nil {
		t.Fatal(err)
	}
	stale, err := s.Stale(ctx, time.Now().Add(time.Minute), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(stale) != 1 || stale[0].ID != open.Steps[0].ID {
		t.Fatalf("stale = %+v; want only %s (the step of the open run)", stale, open.Steps[0].ID)
	}

	for _, q := range []string{
		`INSERT INTO runs (id, status, queue, target, input_id, created_at, updated_at)
			SELECT 'run_' || i, 'succeeded', 'default', '{}', $1, now(), now() FROM generate_series(1, 5000) i`,
		`INSERT INTO steps (id, run_id, ordinal, status, input_id, created_at, updated_at)
			SELECT 'run_' || i || '/0', 'run_' || i, 0, 'committed', $1, now(), now() FROM generate_series(1, 5000) i`,
	} {
		if _, err := conn.Exec(ctx, q, input); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := conn.Exec(ctx, `ANALYZE runs; ANALYZE steps`); err != nil {
		t.Fatal(err)
	}
	failed, failedState := listSQL(RunFailed)
	running, runningState := listSQL(RunRunning)
	now := time.Now()
	for name, c := range map[string]struct {
		sql   string
		args  []any
		index string
	}{
		"stale":        {staleSQL, []any{now, 500}, "steps_run_idx"},
		"expired":      {expiredSQL, []any{now, 100}, "runs_deadline_idx"},
		"driven":       {drivenSQL, []any{"c1", 100}, "runs_state_idx"},
		"list failed":  {failed, []any{"failed", "", 50, failedState}, "runs_state_idx"},
		"list running": {running, []any{"running", "", 50, runningState}, "runs_state_idx"},
	} {
		var raw []byte
		if err := conn.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+c.sql, c.args...).Scan(&raw); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		used := false
		for _, n := range testdb.PlanNodes(t, raw) {
			if rel := n["Relation Name"]; n["Node Type"] == "Seq Scan" && (rel == "steps" || rel == "runs") {
				t.Errorf("%s: scans %v: %s", name, rel, raw)
			}
			if n["Index Name"] == c.index {
				used = true
			}
		}
		if !used {
			t.Errorf("%s: does not read %s: %s", name, c.index, raw)
		}
	}
}
