package runs

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/pkg/store/pgstore"
)

// TestYoungPlansMadeAnewAsTheStoreGrows: on a new store, a worker's step
// start (the one that reads the step's input, as rath_worker, under its
// row-level security) is planned to find the input by scanning versions
// whole; the store grows and its connection keeps that plan; once the
// store refreshes the statistics (as its commits reach a count), the plan
// is made anew and reads the input by key. Without the refresh the young
// plan stayed until autovacuum's first ANALYZE (issue 25, twentieth
// round).
func TestYoungPlansMadeAnewAsTheStoreGrows(t *testing.T) {
	ctx := context.Background()
	dbURL, conn := migratedPG(t)
	owner, _ := openRunStoreAt(t, dbURL)
	worker, db := openRunStoreAt(t, testdb.AsRole(t, dbURL, "rath_worker"))
	// One connection: the statements and their plans are on it.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	input := uuid.New()
	insertRoot(t, conn, input)

	// A young store: past the five plans for the values, the cached one.
	for range 7 {
		r := createRun(t, owner, input, 1, nil)
		var in pgstore.InputScan
		st, err := worker.StartStepReadingInput(ctx, r.Steps[0].ID, "w", &in)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status != StepRunning {
			t.Fatalf("step %s: %s, want running", st.ID, st.Status)
		}
	}
	scansVersions := func() bool {
		t.Helper()
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		scans := false
		err = c.Raw(func(dc any) error {
			pc := dc.(*stdlib.Conn).Conn()
			if _, err := pc.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
				return err
			}
			defer func() { _, _ = pc.Exec(ctx, `RESET plan_cache_mode`) }()
			var name string
			if err := pc.QueryRow(ctx, `SELECT name FROM pg_prepared_statements WHERE strpos(statement, $1) > 0`,
				"LEFT JOIN versions iv ON iv.id = st.input_id").Scan(&name); err != nil {
				t.Fatalf("the start reading its input is not prepared on the store's connection: %v", err)
			}
			var raw []byte
			if err := pc.QueryRow(ctx, `EXPLAIN (FORMAT JSON) EXECUTE "`+name+`"('x/0', 'w', '2026-01-01T00:00:00Z')`).Scan(&raw); err != nil {
				return err
			}
			for _, n := range testdb.PlanNodes(t, raw) {
				if n["Node Type"] == "Seq Scan" && n["Relation Name"] == "versions" {
					scans = true
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return scans
	}
	if !scansVersions() {
		t.Fatal("the young store's start does not scan versions: the premise of statistics.go no longer holds (the planner changed?)")
	}

	// The store grows by 5,000 versions; its connection keeps the plan.
	if _, err := conn.Exec(ctx, `INSERT INTO versions (id, op, len, own_count, parent_count, hash, lane, tenant, created_at)
		SELECT v, 'create', 0, 0, 0, repeat('a', 64), v, 'default', now() FROM (SELECT gen_random_uuid() AS v FROM generate_series(1, 5000)) g`); err != nil {
		t.Fatal(err)
	}
	if !scansVersions() {
		t.Fatal("the grown store's start was planned anew without statistics: the premise of statistics.go no longer holds")
	}

	// The commit that reaches the count refreshes the statistics.
	worker.stats.commits.Store(refreshFirst - 1)
	worker.grew(ctx)
	var analyzed bool
	if err := conn.QueryRow(ctx, `SELECT relpages > 0 FROM pg_class WHERE oid = 'versions'::regclass`).Scan(&analyzed); err != nil {
		t.Fatal(err)
	}
	if !analyzed {
		t.Fatal("the store reached the count and versions has no statistics")
	}
	if scansVersions() {
		t.Error("after the refresh the start still scans versions whole")
	}
	// Nothing has doubled since: the next call analyzes nothing.
	if n, err := worker.refreshStatistics(ctx); err != nil || n != 0 {
		t.Errorf("a second refresh: %d tables analyzed, %v; want 0, nil", n, err)
	}
}

// TestRefreshDueAtPowersOfTwo: the store refreshes the statistics at its
// 64th commit and at each power of two after it, up to refreshLast.
func TestRefreshDueAtPowersOfTwo(t *testing.T) {
	var c statistics
	var due []int64
	for n := int64(1); n <= refreshLast+1; n++ {
		if c.due() {
			due = append(due, n)
		}
	}
	var want []int64
	for p := int64(refreshFirst); p <= refreshLast; p *= 2 {
		want = append(want, p)
	}
	if len(due) != len(want) {
		t.Fatalf("due at %v, want %v", due, want)
	}
	for i := range due {
		if due[i] != want[i] {
			t.Fatalf("due at %v, want %v", due, want)
		}
	}
	c.commits.Store(1 << 40)
	if c.due() {
		t.Error("due past refreshLast")
	}
}
