package runs

import (
	"context"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/testdb"
)

// TestHotPathPlansUseKeys: the step's start and commit find their step and
// run by key in the plan Postgres caches for them (a generic plan, as a
// prepared statement gets after five runs). Scans of an index by status
// (runs_status_idx and steps_open_idx until migrations 00025 and 00026)
// read an entry for every open step or run, and for every status change
// vacuum has not yet removed: the statements grew with the load (issue
// 25: the commit took 550 µs after 30 s at 1,000 steps/s). The tables
// hold enough ended rows for the planner to see a choice.
func TestHotPathPlansUseKeys(t *testing.T) {
	ctx := context.Background()
	_, conn := migratedPG(t)
	insertRoot(t, conn, "00000000-0000-0000-0000-000000000001")
	// Runs and steps like a busy store's: many ended, one in flight.
	for _, q := range []string{
		`INSERT INTO runs (id, status, queue, target, input_id, created_at, updated_at)
			SELECT 'run_' || i, 'succeeded', 'default', '{}',
				'00000000-0000-0000-0000-000000000001', now(), now() FROM generate_series(1, 5000) i`,
		`INSERT INTO steps (id, run_id, ordinal, status, input_id, created_at, updated_at)
			SELECT 'run_' || i || '/0', 'run_' || i, 0, 'committed',
				'00000000-0000-0000-0000-000000000001', now(), now() FROM generate_series(1, 5000) i`,
		`ANALYZE runs`, `ANALYZE steps`,
		// The step in flight, after the statistics: as on a busy store,
		// where they were taken when few runs were open.
		`INSERT INTO runs (id, status, queue, target, input_id, created_at, updated_at)
			VALUES ('run_x', 'running', 'default', '{}', '00000000-0000-0000-0000-000000000001', now(), now())`,
		`INSERT INTO steps (id, run_id, ordinal, status, input_id, created_at, updated_at)
			VALUES ('run_x/0', 'run_x', 0, 'running', '00000000-0000-0000-0000-000000000001', now(), now())`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		sql  string
		args []any
	}{
		"start":          {startStepEpochSQL, []any{"run_x/0", "w1", "2026-01-01T00:00:00Z"}},
		"starts":         {startStepsEpochSQL, []any{"{run_x/0}", "{w1}", "2026-01-01T00:00:00Z"}},
		"start_reading":  {startStepInputSQL, []any{"run_x/0", "w1", "2026-01-01T00:00:00Z"}},
		"starts_reading": {startStepsInputSQL, []any{"{run_x/0}", "{w1}", "2026-01-01T00:00:00Z"}},
		"commit":         {commitStepSQL, []any{"run_x/0", "00000000-0000-0000-0000-000000000001", "2026-01-01T00:00:00Z"}},
		"commits":        {commitStepsSQL, []any{"{run_x/0}", "{00000000-0000-0000-0000-000000000001}", "{2026-01-01T00:00:00Z}"}},
	} {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var plan string
		if _, err := tx.Prepare(ctx, name, c.sql); err != nil {
			t.Fatalf("%s: prepare: %v", name, err)
		}
		var raw []byte
		lits := make([]string, len(c.args))
		for i, a := range c.args {
			lits[i] = "'" + a.(string) + "'" // test constants, no quotes in them
		}
		if err := tx.QueryRow(ctx, `EXPLAIN (FORMAT JSON) EXECUTE `+name+`(`+strings.Join(lits, ", ")+`)`).Scan(&raw); err != nil {
			t.Fatalf("%s: explain: %v", name, err)
		}
		_ = tx.Rollback(ctx)
		plan = string(raw)
		var nodes []map[string]any
		for _, n := range testdb.PlanNodes(t, raw) {
			if _, ok := n["Index Name"]; ok {
				nodes = append(nodes, n)
			}
			if rel := n["Relation Name"]; n["Node Type"] == "Seq Scan" && (rel == "steps" || rel == "runs") {
				t.Errorf("%s: scans %v (every row)", name, rel)
			}
		}
		if len(nodes) == 0 {
			t.Fatalf("%s: no index scan in the plan: %s", name, plan)
		}
		for _, n := range nodes {
			idx, _ := n["Index Name"].(string)
			cond, _ := n["Index Cond"].(string)
			if strings.HasPrefix(idx, "runs_") && idx != "runs_pkey" {
				t.Errorf("%s: scans %s, not runs by key (every open run): %s", name, idx, cond)
			}
		}
	}
}

// TestStartsUseTheCachedPlan runs the grouped start statements (the one
// that reads the steps' inputs too) and the grouped commit ten times each
// on one connection: after Postgres' five plans for the parameters' values
// each runs on its cached generic plan, instead of being planned anew for
// each group (as long as the planner could see the arrays' lengths).
func TestStartsUseTheCachedPlan(t *testing.T) {
	_, conn := migratedPG(t)
	// Empty arrays: the statement starts or commits nothing.
	for name, c := range map[string]struct{ sql, at string }{
		"starts":         {startStepsEpochSQL, "'2026-01-01T00:00:00Z'"},
		"starts_reading": {startStepsInputSQL, "'2026-01-01T00:00:00Z'"},
		"commits":        {commitStepsSQL, "'{}'"},
	} {
		generic, custom := testdb.CachedPlans(t, conn, name, c.sql, 10, "'{}'", "'{}'", c.at)
		if custom > 5 || generic < 5 {
			t.Errorf("%s: %d executions planned for their values, %d on the cached plan; want 5 and 5", name, custom, generic)
		}
	}
}
