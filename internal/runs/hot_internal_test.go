package runs

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestStepRewritesAddNoIndexEntries: on Postgres a step's start, its
// heartbeats and its commit rewrite its row without adding an entry to any
// index of steps (HOT updates), so a step costs its indexes one entry each
// however often it is rewritten (migration 00025). With steps_open_idx,
// whose key and predicate the rewrites change, every rewrite added an
// entry to every index.
func TestStepRewritesAddNoIndexEntries(t *testing.T) {
	ctx := context.Background()
	s, _, conn, input := openRunStore(t)
	output := uuid.New()
	insertRoot(t, conn, output)
	r := createRun(t, s, input, 1, nil)
	stepID := r.Steps[0].ID
	if _, err := s.StartStep(ctx, stepID, "w1"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := s.Touch(ctx, stepID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CommitStep(ctx, stepID, output); err != nil {
		t.Fatal(err)
	}
	var status string
	if err := conn.QueryRow(ctx, `SELECT status FROM steps WHERE id = $1`, stepID).Scan(&status); err != nil || status != "committed" {
		t.Fatalf("step %s: status %q, %v; want committed", stepID, status, err)
	}

	// The entries of each index of steps, live or dead, from its leaf
	// pages (pageinspect: the test server's user is a superuser).
	if _, err := conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pageinspect`); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, `SELECT i.indexrelid::regclass::text,
		(SELECT coalesce(sum(p.live_items + p.dead_items), 0)
		   FROM generate_series(1, pg_relation_size(i.indexrelid) / current_setting('block_size')::int - 1) b,
		        bt_page_stats(i.indexrelid::regclass::text, b) p
		  WHERE p.type = 'l')
		FROM pg_index i WHERE i.indrelid = 'steps'::regclass ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var (
			index   string
			entries int64
		)
		if err := rows.Scan(&index, &entries); err != nil {
			t.Fatal(err)
		}
		n++
		if entries != 1 {
			t.Errorf("index %s holds %d entries for one step started, touched three times and committed; want 1", index, entries)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("steps has no index")
	}
}

// TestStaleReadsTheOpenRunsSteps: the reconciler's search for stale steps
// finds a step of an open run that nobody touched, not one whose run has
// ended (its start would refuse it), and reads steps through the open
// runs by key, not by scanning steps, in a store full of ended runs.
func TestStaleReadsTheOpenRunsSteps(t *testing.T) {
	ctx := context.Background()
	s, _, conn, input := openRunStore(t)
	open := createRun(t, s, input, 1, nil)
	ended := createRun(t, s, input, 1, nil)
	// A run that ended without its step: a workflow's driver completes its
	// run whatever steps it left behind.
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
	var raw []byte
	if err := conn.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+staleSQL, time.Now(), 500).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	byKey := false
	for _, n := range planNodes(t, raw) {
		if n["Node Type"] == "Seq Scan" {
			t.Errorf("stale steps: scans %v: %s", n["Relation Name"], raw)
		}
		if n["Index Name"] == "steps_run_idx" {
			byKey = true
		}
	}
	if !byKey {
		t.Errorf("stale steps: steps not read by their run: %s", raw)
	}
}
