package runs

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// TestCommitStepsAsOneByOne: the grouped commit statement (commitStepsSQL)
// writes, and returns each step, what commitStepSQL run for each step one
// after the other in the group's order does, among them the cases where
// steps of one group depend on each other: two steps of one run (in
// either order), a step that had ended already before and after the step
// that settles its run, a step of a canceled run, a workflow run's step, a
// run with a step outside the group, and a step that does not exist.
func TestCommitStepsAsOneByOne(t *testing.T) {
	ctx := context.Background()
	_, conn := migratedPG(t)
	in := uuid.New()
	insertRoot(t, conn, in)
	// Each step's output is keyed by the step, as a worker commits it:
	// the worker role's policies check that.
	outs := map[string]uuid.UUID{}
	out := func(step string) uuid.UUID {
		if _, ok := outs[step]; !ok {
			outs[step] = uuid.New()
			if _, err := conn.Exec(ctx, `INSERT INTO versions (id, op, len, own_count, parent_count, hash, lane, tenant, created_at, key)
				VALUES ($1, 'create', 0, 0, 0, repeat('a', 64), $1, 'default', now(), $2)`, outs[step], step); err != nil {
				t.Fatal(err)
			}
		}
		return outs[step]
	}
	type step struct {
		ordinal int
		status  string
	}
	// run id → kind, status, steps.
	runs := []struct {
		id, kind, status string
		steps            []step
	}{
		{"A", "agent", "running", []step{{0, "running"}}},
		{"B", "agent", "running", []step{{0, "running"}, {1, "running"}}},
		{"B2", "agent", "running", []step{{0, "running"}, {1, "running"}}},
		{"C", "agent", "canceled", []step{{0, "canceled"}}},
		{"D", "workflow", "running", []step{{0, "running"}}},
		{"G", "agent", "running", []step{{0, "committed"}, {1, "running"}}},
		{"H", "agent", "running", []step{{0, "committed"}, {1, "running"}}},
		{"J", "agent", "running", []step{{0, "running"}, {1, "pending"}}},
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, r := range runs {
		if _, err := conn.Exec(ctx, `INSERT INTO runs (id, status, queue, target, input_id, kind, created_at, updated_at)
			VALUES ($1, $2, 'default', '{}', $3, $4, $5, $5)`, r.id, r.status, in, r.kind, at); err != nil {
			t.Fatal(err)
		}
		for _, s := range r.steps {
			id := fmt.Sprintf("%s/%d", r.id, s.ordinal)
			var o any
			if s.status == "committed" {
				o = out(id + "-before")
			}
			if _, err := conn.Exec(ctx, `INSERT INTO steps (id, run_id, ordinal, status, input_id, output_id, created_at, updated_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $7)`, id, r.id, s.ordinal, s.status, in, o, at); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The group, in its order.
	group := []string{"A/0", "B/0", "B2/1", "C/0", "nope/0", "G/1", "H/0", "B/1", "D/0", "G/0", "H/1", "B2/0", "J/0"}
	ids := make([]string, len(group))
	outIDs := make([]string, len(group))
	times := make([]time.Time, len(group))
	for i, s := range group {
		ids[i], outIDs[i], times[i] = s, out(s).String(), at.Add(time.Duration(i+1)*time.Second)
	}

	// eachRow calls fn with each row's values (err is the query's).
	eachRow := func(rows pgx.Rows, err error, fn func(vs []any)) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			vs, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			fn(vs)
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
	}
	// state reads every run and step as text, in a fixed order.
	state := func(tx pgx.Tx) string {
		var b strings.Builder
		for _, q := range []string{
			`SELECT ` + runCols + ` FROM runs ORDER BY id`,
			`SELECT ` + stepCols + ` FROM steps ORDER BY id`,
		} {
			rows, err := tx.Query(ctx, q)
			eachRow(rows, err, func(vs []any) { fmt.Fprintf(&b, "%v\n", vs) })
		}
		return b.String()
	}
	// returned collects the rows a statement returns, by the place its
	// last column names, each as text without that column.
	returned := func(rows pgx.Rows, err error, got map[int64][]string) {
		t.Helper()
		eachRow(rows, err, func(vs []any) {
			var n int64
			switch v := vs[len(vs)-1].(type) {
			case int32: // commitStepSQL's 1
				n = int64(v)
			case int64: // commitStepsSQL's ordinality
				n = v
			default:
				t.Fatalf("place column %T", v)
			}
			got[n] = append(got[n], fmt.Sprintf("%v", vs[:len(vs)-1]))
		})
	}

	run := func(grouped bool, role string) (map[int64][]string, string) {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if role != "" {
			if _, err := tx.Exec(ctx, `SET LOCAL ROLE `+role); err != nil {
				t.Fatal(err)
			}
		}
		got := map[int64][]string{}
		if grouped {
			rows, err := tx.Query(ctx, commitStepsSQL, ids, outIDs, times)
			returned(rows, err, got)
		} else {
			for i := range group {
				one := map[int64][]string{}
				rows, err := tx.Query(ctx, commitStepSQL, ids[i], outIDs[i], times[i])
				returned(rows, err, one)
				if len(one[1]) > 0 {
					got[int64(i+1)] = one[1]
				}
			}
		}
		return got, state(tx)
	}
	wantRows, wantState := run(false, "")

	// The one-by-one outcome is the one the cases are about.
	settledAt := map[string]string{}
	for n, rs := range wantRows {
		for _, r := range rs {
			if id, _, ok := strings.Cut(strings.TrimPrefix(r, "["), " succeeded "); ok {
				settledAt[group[n-1]] = id
			}
		}
	}
	wantSettled := map[string]string{"A/0": "A", "B/1": "B", "B2/0": "B2", "G/1": "G", "G/0": "G", "H/1": "H"}
	if !maps.Equal(settledAt, wantSettled) {
		t.Fatalf("setup: one by one, the steps that got their run settled: %v, want %v", settledAt, wantSettled)
	}
	if _, ok := wantRows[5]; ok {
		t.Fatal("setup: one by one, the missing step got a row")
	}

	// As the store's owner (the dev stack, a coordinator) and as a
	// cluster's worker, whose role's policies hold it to its steps.
	for _, role := range []string{"", "rath_worker"} {
		gotRows, gotState := run(true, role)
		for _, n := range slices.Sorted(maps.Keys(wantRows)) {
			if fmt.Sprint(gotRows[n]) != fmt.Sprint(wantRows[n]) {
				t.Errorf("%s: step %s: grouped returned %v, one by one %v", role, group[n-1], gotRows[n], wantRows[n])
			}
		}
		for n := range gotRows {
			if _, ok := wantRows[n]; !ok {
				t.Errorf("%s: step %s: grouped returned %v, one by one nothing", role, group[n-1], gotRows[n])
			}
		}
		if gotState != wantState {
			t.Errorf("%s: stored rows differ\ngrouped:\n%s\none by one:\n%s", role, gotState, wantState)
		}
	}
}
