package runs_test

import (
	"context"
	"testing"

	"github.com/rath-run/rath/internal/runs"
)

// TestStatesAcceptedByTheSchema checks that the database accepts every state
// the package names (the CHECK constraints of migration 00009) and refuses
// an unknown one.
func TestStatesAcceptedByTheSchema(t *testing.T) {
	backends(t, func(t *testing.T, url string) {
		ctx := context.Background()
		rs := open(t, url)
		_, db, err := runs.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		r := runs.Run{ID: runs.NewRunID(), Queue: "default", Target: []byte(`{}`), Input: version(t, url)}
		if err := rs.Create(ctx, &r, []runs.Step{{Input: r.Input}}); err != nil {
			t.Fatal(err)
		}
		for _, s := range runs.RunStatuses() {
			if _, err := db.ExecContext(ctx, `UPDATE runs SET status = $1 WHERE id = $2`, string(s), r.ID); err != nil {
				t.Errorf("run status %s refused: %v", s, err)
			}
		}
		for _, s := range runs.StepStatuses() {
			if _, err := db.ExecContext(ctx, `UPDATE steps SET status = $1 WHERE run_id = $2`, string(s), r.ID); err != nil {
				t.Errorf("step status %s refused: %v", s, err)
			}
		}
		if _, err := db.ExecContext(ctx, `UPDATE runs SET status = 'paused' WHERE id = $1`, r.ID); err == nil {
			t.Error("run status paused accepted")
		}
		if _, err := db.ExecContext(ctx, `UPDATE steps SET status = 'paused' WHERE run_id = $1`, r.ID); err == nil {
			t.Error("step status paused accepted")
		}
	})
}
