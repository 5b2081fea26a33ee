package runs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rath-run/rath/pkg/session"
)

// PutStep records the step named key of a workflow run, forwarding input
// through target, with digest the digest of both (flow.StepDigest), and
// reports whether this call created it. A step whose id ("<run>/<key>")
// exists is returned as stored, whatever its target and input: this is
// what makes a re-executed driver find the steps it already made (and
// their outputs) instead of running them again; the caller compares the
// stored step's Digest with its own (the coordinator refuses a changed
// step with flow.ErrNondeterministic). A new step on a
// run that has ended returns ErrTerminal; an agent run takes no new steps
// (ErrNotWorkflow).
func (s *Store) PutStep(ctx context.Context, runID, key string, target json.RawMessage, input session.ID, digest string) (Step, bool, error) {
	if err := ValidKey(key); err != nil {
		return Step{}, false, err
	}
	id := KeyedStepID(runID, key)
	var st Step
	created := false
	err := s.tx(ctx, func(tx *sql.Tx) error {
		existing, err := getStep(ctx, tx, id)
		if err == nil {
			st = existing
			return nil
		}
		if !errors.Is(err, ErrNotFound) {
			return err
		}
		r, err := getRun(ctx, tx, runID)
		if err != nil {
			return err
		}
		if r.Kind != KindWorkflow {
			return fmt.Errorf("run %s: %w", runID, ErrNotWorkflow)
		}
		if r.Status.Terminal() {
			return fmt.Errorf("step %s: run %s is %s: %w", key, runID, r.Status, ErrTerminal)
		}
		// The next ordinal, from the end of the (run_id, ordinal) index:
		// counting the run's steps read all of a fan-out's rows per step.
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(ordinal), -1) + 1 FROM steps WHERE run_id = $1`, runID).Scan(&n); err != nil {
			return fmt.Errorf("next ordinal of %s: %w", runID, err)
		}
		now := s.ts()
		st = Step{ID: id, RunID: runID, Key: key, Ordinal: n, Status: StepPending, Input: input, Target: target, Digest: digest, CreatedAt: now, UpdatedAt: now}
		// Two drivers putting the same key at once: the second insert does
		// nothing and reads the first one's row.
		res, err := tx.ExecContext(ctx,
			`INSERT INTO steps (id, run_id, ordinal, status, input_id, attempts, worker, error, created_at, updated_at, target, digest)
			 VALUES ($1, $2, $3, $4, $5, 0, '', '', $6, $6, $7, $8) ON CONFLICT (id) DO NOTHING`,
			st.ID, st.RunID, st.Ordinal, st.Status, st.Input.String(), now, string(target), digest)
		if err != nil {
			return fmt.Errorf("insert step %s: %w", id, err)
		}
		if k, err := res.RowsAffected(); err == nil && k == 0 {
			st, err = getStep(ctx, tx, id)
			return err
		}
		created = true
		return nil
	})
	if err != nil {
		return Step{}, false, err
	}
	return st, created, nil
}

// AcceptChanges records that the owner of workflow run runID accepts
// steps whose input changed since they were recorded: from now on, a
// re-executed driver keeps such a step's recorded result. It sets the
// run's ChangesAcceptedAt (to now, each time) and reports whether the run
// was reopened: a run that failed because a step's input changed
// (reopenable returns true for its error) goes back to running, and the
// steps its failure canceled back to pending, so its driver can resume
// it. Any other ended run returns ErrTerminal.
func (s *Store) AcceptChanges(ctx context.Context, runID string, reopenable func(reason string) bool) (Run, bool, error) {
	reopened := false
	err := s.tx(ctx, func(tx *sql.Tx) error {
		r, err := getRun(ctx, tx, runID)
		if err != nil {
			return err
		}
		if r.Kind != KindWorkflow {
			return fmt.Errorf("accept changes of run %s: %w", runID, ErrNotWorkflow)
		}
		now := s.ts()
		switch {
		case r.Status == RunFailed && reopenable != nil && reopenable(r.Error):
			reopened = true
			if _, err = tx.ExecContext(ctx,
				`UPDATE runs SET status = 'running', error = '', changes_accepted_at = $2, updated_at = $2 WHERE id = $1`, runID, now); err != nil {
				break
			}
			// The failure canceled the run's unfinished steps (only
			// ending a run cancels steps): they are pending again, for
			// the resumed driver to find and a worker to run (the
			// reconciler publishes their jobs again).
			_, err = tx.ExecContext(ctx,
				`UPDATE steps SET status = 'pending', finished_at = NULL, updated_at = $2 WHERE run_id = $1 AND status = 'canceled'`, runID, now)
		case r.Status.Terminal():
			return fmt.Errorf("accept changes of run %s: it is %s: %w", runID, r.Status, ErrTerminal)
		default:
			_, err = tx.ExecContext(ctx, `UPDATE runs SET changes_accepted_at = $2, updated_at = $2 WHERE id = $1`, runID, now)
		}
		if err != nil {
			return fmt.Errorf("accept changes of run %s: %w", runID, err)
		}
		return nil
	})
	if err != nil {
		return Run{}, false, err
	}
	r, err := s.Get(ctx, runID)
	return r, reopened, err
}

// ErrNotWorkflow reports an operation meant for workflow runs only.
var ErrNotWorkflow = errors.New("rath: not a workflow run")

// Complete ends a workflow run succeeded with output, the version its
// driver computed, canceling the steps it left unfinished (a driver that
// returned while steps it had started were still running): a worker
// running one aborts at its next heartbeat (a canceled run's workers hear
// of it at once, from its event). Completing it again with the same
// output is a no-op; a run that ended otherwise returns ErrTerminal.
func (s *Store) Complete(ctx context.Context, runID string, output session.ID) (Run, error) {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		r, err := getRun(ctx, tx, runID)
		if err != nil {
			return err
		}
		if r.Kind != KindWorkflow {
			return fmt.Errorf("complete run %s: %w", runID, ErrNotWorkflow)
		}
		if r.Status == RunSucceeded && r.Output != nil && *r.Output == output {
			return nil
		}
		if r.Status.Terminal() {
			return fmt.Errorf("complete run %s: it is %s: %w", runID, r.Status, ErrTerminal)
		}
		now := s.ts()
		if _, err := tx.ExecContext(ctx,
			`UPDATE runs SET status = 'succeeded', output_id = $2, error = '', updated_at = $3 WHERE id = $1`,
			runID, output.String(), now); err != nil {
			return fmt.Errorf("complete run %s: %w", runID, err)
		}
		return cancelOpenSteps(ctx, tx, runID, now)
	})
	if err != nil {
		return Run{}, err
	}
	return s.Get(ctx, runID)
}

// FailRun ends a run failed with reason, canceling its unfinished steps.
// Failing a failed run again is a no-op; a run that ended otherwise returns
// ErrTerminal.
func (s *Store) FailRun(ctx context.Context, runID, reason string) (Run, error) {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		r, err := getRun(ctx, tx, runID)
		if err != nil {
			return err
		}
		if r.Status == RunFailed {
			return nil
		}
		if r.Status.Terminal() {
			return fmt.Errorf("fail run %s: it is %s: %w", runID, r.Status, ErrTerminal)
		}
		return endRun(ctx, tx, runID, RunFailed, reason, s.ts())
	})
	if err != nil {
		return Run{}, err
	}
	return s.Get(ctx, runID)
}

// Expire ends, timed_out, every unfinished run whose deadline is before
// now, canceling their unfinished steps, and returns them (at most limit).
func (s *Store) Expire(ctx context.Context, now time.Time, limit int) ([]Run, error) {
	ids, err := s.expiredIDs(ctx, now, limit)
	if err != nil {
		return nil, err
	}
	var out []Run
	for _, id := range ids {
		ended := false
		err := s.tx(ctx, func(tx *sql.Tx) error {
			r, err := getRun(ctx, tx, id)
			if err != nil || r.Status.Terminal() {
				return err
			}
			ended = true
			return endRun(ctx, tx, id, RunTimedOut, "deadline passed", s.ts())
		})
		if err != nil {
			return out, err
		}
		if ended {
			r, err := s.Get(ctx, id)
			if err != nil {
				return out, err
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// expiredSQL finds the open runs whose deadline passed before $1, at most
// $2 (runs_deadline_idx).
const expiredSQL = `SELECT id FROM runs WHERE deadline IS NOT NULL AND deadline < $1 AND state = 'open'
	ORDER BY deadline LIMIT $2`

func (s *Store) expiredIDs(ctx context.Context, now time.Time, limit int) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, expiredSQL, now.UTC(), limit)
	if err != nil {
		return nil, fmt.Errorf("expired runs: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// Driven returns the unfinished workflow runs of driver, oldest first (at
// most limit), without their steps: what a restarted coordinator resumes.
func (s *Store) Driven(ctx context.Context, driver string, limit int) ([]Run, error) {
	return queryAll(ctx, s.db, "driven runs", scanRun, drivenSQL, driver, limit)
}

// drivenSQL is Driven's statement: $1 the driver, $2 the limit.
const drivenSQL = `SELECT ` + runCols + ` FROM runs WHERE kind = 'workflow' AND driver = $1 AND state = 'open'
	ORDER BY id LIMIT $2`

// MarkRunning moves a pending run to running (a driver started it).
func (s *Store) MarkRunning(ctx context.Context, runID string) error {
	_, err := s.db.ExecContext(ctx,
		`UPDATE runs SET status = 'running', updated_at = $2 WHERE id = $1 AND status = 'pending'`, runID, s.ts())
	if err != nil {
		return fmt.Errorf("start run %s: %w", runID, err)
	}
	return nil
}

// endRun sets a run's terminal status (and error, when reason is set) and
// cancels its unfinished steps: a worker running one sees it at its next
// heartbeat (Touch returns ErrTerminal) and aborts.
func endRun(ctx context.Context, tx *sql.Tx, runID string, status RunStatus, reason string, now time.Time) error {
	if _, err := tx.ExecContext(ctx,
		`UPDATE runs SET status = $2, error = CASE WHEN $3 = '' THEN error ELSE $3 END, updated_at = $4 WHERE id = $1`,
		runID, string(status), reason, now); err != nil {
		return fmt.Errorf("end run %s: %w", runID, err)
	}
	return cancelOpenSteps(ctx, tx, runID, now)
}

// cancelOpenSteps cancels the unfinished steps of a run that is ending.
func cancelOpenSteps(ctx context.Context, tx *sql.Tx, runID string, now time.Time) error {
	if _, err := tx.ExecContext(ctx,
		`UPDATE steps SET status = 'canceled', finished_at = $2, updated_at = $2
		 WHERE run_id = $1 AND status IN ('pending','running','waiting')`, runID, now); err != nil {
		return fmt.Errorf("cancel steps of %s: %w", runID, err)
	}
	return nil
}

// Head returns a run without its steps (one row, whatever the run's size).
func (s *Store) Head(ctx context.Context, id string) (Run, error) {
	return getRun(ctx, s.db, id)
}
