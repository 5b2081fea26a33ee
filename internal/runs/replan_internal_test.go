package runs

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/rath-run/rath/internal/testdb"
)

// TestGroupedStartsPlannedAnewAsTheStoreGrows: on a new store the grouped
// start's generic plan scans runs whole (the planner's guess for a table
// without statistics); once the store has grown past the first count of
// replanAfter, its grouped starts go as the next generation's statement,
// which its connection prepares anew and Postgres plans on the grown
// tables, by key. Without the generations the young plan was the only
// one, kept until autovacuum's first visit (issue 25, nineteenth round).
func TestGroupedStartsPlannedAnewAsTheStoreGrows(t *testing.T) {
	ctx := context.Background()
	s, db, conn, input := openRunStore(t)
	// One connection: the statements and their plans are on it.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	startTwo := func() {
		t.Helper()
		a, b := createRun(t, s, input, 1, nil), createRun(t, s, input, 1, nil)
		calls := []*startCall{{stepID: a.Steps[0].ID, worker: "w"}, {stepID: b.Steps[0].ID, worker: "w"}}
		if err := s.startSteps(ctx, calls); err != nil {
			t.Fatal(err)
		}
		if !calls[0].ok || !calls[1].ok {
			t.Fatal("a grouped start did not start its steps")
		}
	}
	// A young store: past the five plans for the values, the cached one.
	for range 7 {
		startTwo()
	}
	// The store grows, with no statistics taken yet.
	for _, q := range []string{
		`INSERT INTO runs (id, status, queue, target, input_id, created_at, updated_at)
			SELECT 'ended_' || i, 'succeeded', 'default', '{}', $1, now(), now() FROM generate_series(1, 5000) i`,
		`INSERT INTO steps (id, run_id, ordinal, status, input_id, created_at, updated_at)
			SELECT 'ended_' || i || '/0', 'ended_' || i, 0, 'committed', $1, now(), now() FROM generate_series(1, 5000) i`,
	} {
		if _, err := conn.Exec(ctx, q, input); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s.growth.n.Store(replanAfter[0])
	for range 7 {
		startTwo()
	}

	// Each generation's generic plan, as the store's connection holds it.
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	scansRuns := map[int]bool{}
	err = c.Raw(func(dc any) error {
		pc := dc.(*stdlib.Conn).Conn()
		if _, err := pc.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
			return err
		}
		for gen := range 2 {
			var name string
			if err := pc.QueryRow(ctx, `SELECT name FROM pg_prepared_statements WHERE starts_with(statement, $1)`, generationMark(gen)).Scan(&name); err != nil {
				t.Errorf("generation %d: not prepared on the store's connection: %v", gen, err)
				continue
			}
			var raw []byte
			if err := pc.QueryRow(ctx, `EXPLAIN (FORMAT JSON) EXECUTE "`+name+`"('{x/0}', '{w}', '2026-01-01T00:00:00Z')`).Scan(&raw); err != nil {
				return err
			}
			for _, n := range testdb.PlanNodes(t, raw) {
				if n["Node Type"] == "Seq Scan" && n["Relation Name"] == "runs" {
					scansRuns[gen] = true
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !scansRuns[0] {
		t.Error("the young store's grouped start does not scan runs: the premise of replan.go no longer holds (the planner changed?)")
	}
	if scansRuns[1] {
		t.Error("the grown store's grouped start, prepared anew, scans runs whole")
	}
}

// TestGrowthMovesGenerations: the generation moves on past each count of
// replanAfter, and stays at the last.
func TestGrowthMovesGenerations(t *testing.T) {
	var g growth
	q := generationsOf("SELECT 1")
	want := func(n int64, gen int) {
		t.Helper()
		g.n.Store(n - 1)
		if got := g.next(&q); got != q[gen] {
			t.Errorf("call %d: %q, want generation %d", n, got, gen)
		}
	}
	want(1, 0)
	want(replanAfter[0], 0)
	want(replanAfter[0]+1, 1)
	want(replanAfter[1]+1, 2)
	want(replanAfter[2], 2)
	want(replanAfter[2]+1, 3)
	want(1<<40, 3)
}
