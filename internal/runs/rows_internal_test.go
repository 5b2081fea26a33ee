package runs

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestCreateRowsWriteWhatSingleRowsWould: the multi-row forms of a run's
// and a step's insert (what a group commit of submissions runs,
// pgstore.Stmt.Rows) store exactly the rows the single-row statements
// store, column by column, for runs that set every field a submission can
// (budget, deadline, driver, workflow, trace context, conversation) and
// for runs that set none, and a run with two first steps.
func TestCreateRowsWriteWhatSingleRowsWould(t *testing.T) {
	ctx := context.Background()
	_, conn := migratedPG(t)
	const input = "00000000-0000-0000-0000-000000000001"
	insertRoot(t, conn, input)
	s := &Store{now: func() time.Time { return time.Date(2026, 11, 27, 12, 0, 0, 123456789, time.UTC) }}
	deadline := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	full := func(id string) (*Run, []Step) {
		return &Run{ID: id, Queue: "q", Target: json.RawMessage(`{"name":"a"}`), Budget: Budget{MaxTokens: 10, MaxCostUSD: 0.5},
				Kind: KindWorkflow, Driver: "coordinator", Workflow: "wf.yaml", Deadline: &deadline, TraceContext: "00-abc-def-01", Conversation: "conv"},
			[]Step{{Ordinal: 0, Target: json.RawMessage(`{"t":1}`)}, {Ordinal: 1}}
	}
	bare := func(id string) (*Run, []Step) {
		return &Run{ID: id, Queue: "q", Target: json.RawMessage(`{}`)}, []Step{{Ordinal: 0}}
	}
	for name, build := range map[string]func(string) (*Run, []Step){"full": full, "bare": bare} {
		// Alone: the single-row statements.
		r, steps := build("run_" + name + "_alone")
		for _, x := range s.createStmts(withInput(r, steps, input)) {
			if _, err := conn.Exec(ctx, x.SQL, x.Args...); err != nil {
				t.Fatalf("%s alone: %s: %v", name, x.what, err)
			}
		}
		// Grouped: two runs, each statement's multi-row form with the
		// runs' arguments as arrays, place by place.
		var lists [][]stmt
		for _, id := range []string{"run_" + name + "_g1", "run_" + name + "_g2"} {
			r, steps := build(id)
			lists = append(lists, s.createStmts(withInput(r, steps, input)))
		}
		for j := range lists[0] {
			if lists[0][j].rows == "" {
				t.Fatalf("%s: %s has no multi-row form", name, lists[0][j].what)
			}
			cols := make([]any, len(lists[0][j].Args))
			for i := range cols {
				col := []any{}
				for _, l := range lists {
					col = append(col, l[j].Args[i])
				}
				cols[i] = col
			}
			if _, err := conn.Exec(ctx, lists[0][j].rows, cols...); err != nil {
				t.Fatalf("%s grouped: %s: %v", name, lists[0][j].what, err)
			}
		}
		for _, g := range []string{"g1", "g2"} {
			for _, q := range []string{
				`SELECT to_jsonb(r) - 'id' FROM runs r WHERE id = $1`,
				`SELECT jsonb_agg(to_jsonb(s) - 'id' - 'run_id' ORDER BY ordinal) FROM steps s WHERE run_id = $1`,
			} {
				var alone, grouped string
				if err := conn.QueryRow(ctx, q, "run_"+name+"_alone").Scan(&alone); err != nil {
					t.Fatal(err)
				}
				if err := conn.QueryRow(ctx, q, "run_"+name+"_"+g).Scan(&grouped); err != nil {
					t.Fatal(err)
				}
				if grouped != alone {
					t.Errorf("%s %s: grouped %s\nalone %s", name, g, grouped, alone)
				}
			}
		}
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM steps`).Scan(&n); err != nil || n != 3*2+3*1 {
		t.Fatalf("steps stored: %d, %v; want %d", n, err, 9)
	}
}

// withInput sets the run's and its steps' input.
func withInput(r *Run, steps []Step, input string) (*Run, []Step) {
	id := uuid.MustParse(input)
	r.Input = id
	for i := range steps {
		steps[i].Input = id
	}
	return r, steps
}
