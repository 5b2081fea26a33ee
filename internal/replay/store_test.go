package replay

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/store/storeurl"
)

// TestRunOnStores records the fan-out → merge → compress → select → agent
// workflow as a workflow run of a real store (its steps in the run store,
// as a driver records them), loads it back (LoadRun) and replays it whole
// with no model call; then keeps the steps a rerun from the select step
// keeps (KeptSteps, CreateRerun). On SQLite and Postgres.
func TestRunOnStores(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			url := "sqlite:" + filepath.Join(t.TempDir(), "rath.db")
			if backend == "postgres" {
				url = testdb.Postgres(t)
			}
			g, err := storeurl.Open(ctx, url, storeurl.Options{Migrate: true, Create: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = g.Close() })
			rs, db, err := runs.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })

			runID := runs.NewRunID()
			// The run record comes first (a driver's run is submitted
			// before its steps); its input is set once recorded.
			run := runs.Run{ID: runID, Kind: runs.KindWorkflow, Driver: runs.DriverClient, Queue: "default", Target: json.RawMessage(`{"driver":"client"}`)}
			m := &countingModel{}
			rec := recordRunAs(t, g, m, runID)
			run.Input = rec.Input
			if err := rs.Create(ctx, &run, nil); err != nil {
				t.Fatal(err)
			}
			for _, st := range rec.Steps {
				target, err := json.Marshal(st.Call)
				if err != nil {
					t.Fatal(err)
				}
				put, _, err := rs.PutStep(ctx, runID, st.Key, target, st.Input, "")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := rs.StartStep(ctx, put.ID, "w1"); err != nil {
					t.Fatal(err)
				}
				if _, err := rs.CommitStep(ctx, put.ID, st.Output); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := rs.Complete(ctx, runID, *rec.Output); err != nil {
				t.Fatal(err)
			}

			loaded, err := LoadRun(ctx, rs, runID)
			if err != nil {
				t.Fatal(err)
			}
			if len(loaded.Steps) != len(rec.Steps) || *loaded.Output != *rec.Output {
				t.Fatalf("loaded %d steps, output %v; want %d, %v", len(loaded.Steps), loaded.Output, len(rec.Steps), rec.Output)
			}
			calls := m.calls.Load()
			rep, err := Run(ctx, g, loaded, Options{Strict: true, Worker: "test"})
			if err != nil {
				t.Fatalf("strict replay: %v\n%+v", err, rep)
			}
			if !rep.Identical || rep.Replay == nil || len(rep.Steps) != 8 {
				t.Fatalf("report: %+v", rep)
			}
			if m.calls.Load() != calls {
				t.Fatalf("the replay called the model")
			}

			// A rerun from the select step keeps the 3 branches and the
			// compression.
			full, err := rs.Get(ctx, runID)
			if err != nil {
				t.Fatal(err)
			}
			var from string
			for _, st := range rec.Steps {
				if st.Call.Kind == flow.KindSelect {
					from = st.Key
				}
			}
			kept, err := KeptSteps(ctx, g, full, from)
			if err != nil {
				t.Fatal(err)
			}
			if len(kept) != 4 {
				t.Fatalf("kept %d steps, want 4", len(kept))
			}
			nr := runs.Run{ID: runs.NewRunID(), Kind: runs.KindWorkflow, Driver: runs.DriverCoordinator, Workflow: "steps: []", Queue: "default",
				Target: json.RawMessage(`{}`), Input: full.Input}
			if err := rs.CreateRerun(ctx, &nr, kept); err != nil {
				t.Fatal(err)
			}
			got, err := rs.Get(ctx, nr.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != runs.RunPending || got.ChangesAcceptedAt == nil || len(got.Steps) != 4 {
				t.Fatalf("rerun run: %+v", got)
			}
			for i, st := range got.Steps {
				if st.Status != runs.StepCommitted || st.Output == nil || *st.Output != *kept[i].Output || st.Key != kept[i].Key {
					t.Errorf("kept step %d: %+v", i, st)
				}
			}
			if _, err := KeptSteps(ctx, g, full, "nope"); err == nil {
				t.Errorf("KeptSteps of an unknown key: no error")
			}
		})
	}
}
