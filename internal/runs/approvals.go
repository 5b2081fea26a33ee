package runs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rath-run/rath/pkg/session"
)

// Approvals: a step whose agent called a tool that needs a human's approval
// commits what it has (the waiting version) and waits:
//
//	running ──WaitStep──► waiting ──Continue──► committed (its waiting version)
//	                                   └──► continuation step (pending), forwarding
//	                                        the waiting version plus the decisions
//
// The decisions themselves are approval chunks in the Session Graph; this
// store records only where execution stands. A waiting step is never
// started again (StartStep refuses it, so a redelivered job of it is acked
// and dropped) and never republished (the reconciler looks at pending and
// running steps only). Its continuation is a new step whose id derives
// from the waiting one ([ContinuationID]); a continuation may wait in turn.
// A run is waiting while one of its steps waits and no other runs.

// ErrNotWaiting reports that a run or step has nothing waiting for a
// decision.
var ErrNotWaiting = errors.New("rath: nothing waits for a decision")

// ContinuationID returns the id of the step that continues stepID once its
// approvals are decided: "<stepID>/c1", and for a continuation ".../cN"
// the next one ".../cN+1", so a chain of waits stays short and every id is
// deterministic.
func ContinuationID(stepID string) string {
	if i := strings.LastIndex(stepID, "/c"); i >= 0 {
		if n, err := strconv.Atoi(stepID[i+2:]); err == nil && n > 0 && strconv.Itoa(n) == stepID[i+2:] {
			return stepID[:i] + "/c" + strconv.Itoa(n+1)
		}
	}
	return stepID + "/c1"
}

// WaitStep records that a running step paused for a decision: waiting is
// the version it committed (recorded as its output); its run waits unless
// another of its steps is running. Recording the same wait again is a
// no-op; a step that has ended returns ErrTerminal.
func (s *Store) WaitStep(ctx context.Context, stepID string, waiting session.ID) (Run, error) {
	var runID string
	err := s.tx(ctx, func(tx *sql.Tx) error {
		st, err := getStep(ctx, tx, stepID)
		if err != nil {
			return err
		}
		runID = st.RunID
		switch {
		case st.Status == StepWaiting:
			return nil
		case st.Status.Terminal():
			return fmt.Errorf("wait step %s: it is %s: %w", stepID, st.Status, ErrTerminal)
		}
		now := s.ts()
		if _, err := tx.ExecContext(ctx,
			`UPDATE steps SET status = 'waiting', output_id = $2, updated_at = $3 WHERE id = $1`,
			stepID, waiting.String(), now); err != nil {
			return fmt.Errorf("wait step %s: %w", stepID, err)
		}
		return s.settleWaiting(ctx, tx, st.RunID, now)
	})
	if err != nil {
		return Run{}, err
	}
	return getRun(ctx, s.db, runID)
}

// settleWaiting sets an unfinished run waiting when it has a waiting step
// and none pending or running, and running when it has none waiting.
func (s *Store) settleWaiting(ctx context.Context, tx *sql.Tx, runID string, now time.Time) error {
	var active, waiting int
	if err := tx.QueryRowContext(ctx,
		`SELECT
		   COALESCE(SUM(CASE WHEN status IN ('pending','running') THEN 1 ELSE 0 END), 0),
		   COALESCE(SUM(CASE WHEN status = 'waiting' THEN 1 ELSE 0 END), 0)
		 FROM steps WHERE run_id = $1`, runID).Scan(&active, &waiting); err != nil {
		return fmt.Errorf("count steps of %s: %w", runID, err)
	}
	status := RunRunning
	if waiting > 0 && active == 0 {
		status = RunWaiting
	}
	if _, err := tx.ExecContext(ctx,
		`UPDATE runs SET status = $2, updated_at = $3 WHERE id = $1 AND status IN ('pending','running','waiting')`,
		runID, string(status), now); err != nil {
		return fmt.Errorf("run %s %s: %w", runID, status, err)
	}
	return nil
}

// WaitingSteps returns the run's waiting steps in ordinal order.
func (s *Store) WaitingSteps(ctx context.Context, runID string) ([]Step, error) {
	if _, err := getRun(ctx, s.db, runID); err != nil {
		return nil, err
	}
	return queryAll(ctx, s.db, fmt.Sprintf("waiting steps of %s", runID), scanStep, `SELECT `+stepCols+` FROM steps WHERE run_id = $1 AND status = 'waiting' ORDER BY ordinal, id`, runID)
}

// Continue ends the waiting step stepID — committed, its output the waiting
// version — and records its continuation ([ContinuationID]): a pending step
// forwarding head (the waiting version with the decisions appended) through
// the same target. The run goes back to running. It is idempotent: when the
// continuation exists it is returned with created false. A step that is not
// waiting (and was not continued) returns ErrNotWaiting.
func (s *Store) Continue(ctx context.Context, stepID string, head session.ID) (cont Step, created bool, err error) {
	id := ContinuationID(stepID)
	err = s.tx(ctx, func(tx *sql.Tx) error {
		st, err := getStep(ctx, tx, stepID)
		if err != nil {
			return err
		}
		if existing, err := getStep(ctx, tx, id); err == nil {
			cont = existing
			return nil
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		if st.Status != StepWaiting {
			return fmt.Errorf("step %s is %s: %w", stepID, st.Status, ErrNotWaiting)
		}
		r, err := getRun(ctx, tx, st.RunID)
		if err != nil {
			return err
		}
		if r.Status.Terminal() {
			return fmt.Errorf("continue step %s: run %s is %s: %w", stepID, r.ID, r.Status, ErrTerminal)
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(ordinal), -1) + 1 FROM steps WHERE run_id = $1`, st.RunID).Scan(&n); err != nil {
			return fmt.Errorf("next ordinal of %s: %w", st.RunID, err)
		}
		now := s.ts()
		if _, err := tx.ExecContext(ctx,
			`UPDATE steps SET status = 'committed', finished_at = $2, updated_at = $2 WHERE id = $1`, stepID, now); err != nil {
			return fmt.Errorf("end waiting step %s: %w", stepID, err)
		}
		cont = Step{ID: id, RunID: st.RunID, Ordinal: n, Status: StepPending, Input: head, Target: st.Target,
			CreatedAt: now, UpdatedAt: now}
		cont.Key = strings.TrimPrefix(id, st.RunID+"/")
		if err := insertStep(ctx, tx, &cont); err != nil {
			return err
		}
		created = true
		return s.settleWaiting(ctx, tx, st.RunID, now)
	})
	if err != nil {
		return Step{}, false, err
	}
	return cont, created, nil
}

// Final follows a step's continuations and returns the last: the step
// whose status and output are the outcome of stepID once approvals are
// decided. A driver waiting on a step that went through approvals reads
// its result here.
func (s *Store) Final(ctx context.Context, stepID string) (Step, error) {
	st, err := getStep(ctx, s.db, stepID)
	for err == nil && st.Status == StepCommitted {
		next, nerr := getStep(ctx, s.db, ContinuationID(st.ID))
		if errors.Is(nerr, ErrNotFound) {
			return st, nil
		}
		st, err = next, nerr
	}
	return st, err
}
