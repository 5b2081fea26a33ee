package runs

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// CreateRerun records r, a new workflow run that reruns another from one
// of its steps, with kept: steps of the original run copied as already
// committed (their input, output, target, digest, attempts and worker as
// recorded; their ids and ordinals given by the caller). r accepts
// changes from the start (ChangesAcceptedAt): its driver re-executes the
// workflow, finds the kept keys committed and returns their recorded
// outputs even when a changed model gives them another digest, and runs
// every other step anew. r is pending, as a submitted run.
func (s *Store) CreateRerun(ctx context.Context, r *Run, kept []Step) error {
	if r.Kind != KindWorkflow {
		return fmt.Errorf("rerun run %s: %w", r.ID, ErrNotWorkflow)
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		for _, st := range s.createStmts(r, nil) {
			if _, err := tx.ExecContext(ctx, st.SQL, st.Args...); err != nil {
				return fmt.Errorf("%s: %w", st.what, err)
			}
		}
		now := r.CreatedAt
		r.ChangesAcceptedAt = &now
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET changes_accepted_at = $2 WHERE id = $1`, r.ID, now); err != nil {
			return fmt.Errorf("rerun run %s: accept changes: %w", r.ID, err)
		}
		for i := range kept {
			st := &kept[i]
			if err := ValidKey(st.Key); err != nil {
				return err
			}
			if st.Output == nil {
				return fmt.Errorf("rerun run %s: kept step %s has no output", r.ID, st.Key)
			}
			st.ID, st.RunID, st.Status = KeyedStepID(r.ID, st.Key), r.ID, StepCommitted
			st.CreatedAt, st.UpdatedAt, st.FinishedAt, st.Error = now, now, timePtr(now), ""
			if _, err := tx.ExecContext(ctx,
				`INSERT INTO steps (id, run_id, ordinal, status, input_id, output_id, attempts, worker, error, created_at, updated_at, finished_at, target, digest)
				 VALUES ($1, $2, $3, 'committed', $4, $5, $6, $7, '', $8, $8, $8, $9, $10)`,
				st.ID, st.RunID, st.Ordinal, st.Input.String(), st.Output.String(), st.Attempts, st.Worker, now, string(st.Target), st.Digest); err != nil {
				return fmt.Errorf("rerun run %s: keep step %s: %w", r.ID, st.Key, err)
			}
		}
		r.Steps = kept
		return nil
	})
}

func timePtr(t time.Time) *time.Time { return &t }
