package runs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/sqlitestore"
)

// The step hot path on SQLite, the embedded default. Every write there
// queues for the one writer connection, and each transaction's commit
// writes its pages to the WAL again, so a step's bookkeeping costs what
// its transactions and statements cost in this process. The common case
// starts a step in two statements (startStepPlainSQL and the run's
// update) and commits it inside the version's own write transaction
// ([Store.CommitStepVersionExec]): three transactions a step, the submit
// included, where the general code takes four and a dozen statements.
// Anything unusual falls back to the general code, as on Postgres
// (fastpath.go).

// startStepPlainSQL marks a startable step running: a pending or running
// step of a run that has not ended and has no deadline (the general path
// compares a deadline with the clock). It returns no row otherwise, and
// StartStep decides in the same transaction. It is plain SQL that SQLite
// and Postgres both run.
const startStepPlainSQL = `UPDATE steps SET status = 'running', attempts = attempts + 1, worker = $2,
	started_at = COALESCE(started_at, $3), updated_at = $3
WHERE id = $1 AND status IN ('pending','running')
  AND EXISTS (SELECT 1 FROM runs r WHERE r.id = steps.run_id
	AND r.status IN ('pending','running','waiting') AND r.deadline IS NULL)
RETURNING ` + stepCols

// startRunSQL marks run $1 running at $2 if it is pending.
const startRunSQL = `UPDATE runs SET status = 'running', updated_at = $2 WHERE id = $1 AND status = 'pending'`

// startStepPlain is StartStep's common case on a store that is not
// relaxed (SQLite), in tx; ok is false when the step is not plainly
// startable and the general path must decide.
func (s *Store) startStepPlain(ctx context.Context, tx execQueryer, stepID, worker string) (st Step, ok bool, err error) {
	now := s.ts()
	st, err = scanStep(tx.QueryRowContext(ctx, startStepPlainSQL, stepID, worker, now))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Step{}, false, nil
	case err != nil:
		return Step{}, false, fmt.Errorf("start step %s: %w", stepID, err)
	}
	if _, err := tx.ExecContext(ctx, startRunSQL, st.RunID, now); err != nil {
		return Step{}, false, fmt.Errorf("start run %s: %w", st.RunID, err)
	}
	return st, true, nil
}

// ExecPutter is a graph store that runs the caller's statements in a
// version's write transaction: the SQLite store
// ([sqlitestore.Store.PutExec]). Put is its plain, idempotent commit.
type ExecPutter interface {
	PutExec(ctx context.Context, v *session.Version, after func(ctx context.Context, ex sqlitestore.Execer) error) (*session.Version, error)
	Put(ctx context.Context, v *session.Version) (*session.Version, error)
}

// commitStepPlainSQL records a live step committed with output $2 at $3
// and returns its run; an ended or missing step returns no row.
const commitStepPlainSQL = `UPDATE steps SET status = 'committed', output_id = $2, error = '', finished_at = $3, updated_at = $3
WHERE id = $1 AND status IN ('pending','running','waiting')
RETURNING run_id`

// CommitStepVersionExec is [Store.CommitStepVersion] on a graph store of
// this database that runs statements in its write transaction (SQLite):
// v is committed and the step recorded committed (its journal pruned
// when prune is set, and its agent run settled as CommitStep settles it)
// in one transaction, where a Put and then CommitStep take two. A
// version stored before (a redelivered step) or a step that is not live
// goes the general way: Put, then CommitStep, which decide and report as
// before.
func (s *Store) CommitStepVersionExec(ctx context.Context, g ExecPutter, stepID string, v *session.Version, prune bool) (*session.Version, Run, error) {
	var r Run
	found := false
	got, err := g.PutExec(ctx, v, func(ctx context.Context, ex sqlitestore.Execer) error {
		var err error
		r, found, err = s.commitStepIn(ctx, ex, stepID, v.ID, prune)
		return err
	})
	switch {
	case err == nil && found:
		return got, r, nil
	case err == nil:
		// The version is committed; the step was not live.
	case errors.Is(err, session.ErrConflict):
		// Its id or key was stored before: Put returns what is stored
		// (a keyed replay) or says how it conflicts.
		if got, err = g.Put(ctx, v); err != nil {
			return nil, Run{}, err
		}
	default:
		return nil, Run{}, err
	}
	r, err = s.CommitStep(ctx, stepID, got.ID)
	if err != nil {
		return nil, Run{}, err
	}
	return got, r, nil
}

// commitStepIn records step stepID committed with output in tx, prunes its
// journal if prune, settles its run, and returns the run as it is then;
// found is false, and nothing is written, when the step is missing or
// has ended.
func (s *Store) commitStepIn(ctx context.Context, tx execQueryer, stepID string, output session.ID, prune bool) (r Run, found bool, err error) {
	now := s.ts()
	var runID string
	err = tx.QueryRowContext(ctx, commitStepPlainSQL, stepID, output.String(), now).Scan(&runID)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Run{}, false, nil
	case err != nil:
		return Run{}, false, fmt.Errorf("commit step %s: %w", stepID, err)
	}
	if prune {
		if err := pruneJournal(ctx, tx, stepID); err != nil {
			return Run{}, false, err
		}
	}
	if err := settleRun(ctx, tx, runID, now); err != nil {
		return Run{}, false, err
	}
	r, err = getRun(ctx, tx, runID)
	return r, err == nil, err
}
