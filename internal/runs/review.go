package runs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Reviews: a step that stopped on an ambiguous tool call (a call an
// earlier delivery started and recorded no result for, to a tool not
// declared idempotent; see agent.Journal) waits for a human's review:
//
//	running ──NeedsReview──► waiting (the journal holds an "ambiguous" entry)
//	waiting ──Review──► pending (the journal holds the "review" entry);
//	                    the step is published again and resumes from its journal
//
// The store keeps no new status: a step waiting for a review is a waiting
// step (never started again, never republished, its run waiting) whose
// journal holds an ambiguous entry without a review; the API shows it, and
// its run, as needs_review ([PendingReviews]). Both entries are journal
// entries (kinds "ambiguous" and "review", keyed by the call's round and
// id), so they stay with the step as evidence; the resumed step records
// the decision in its transcript as a review chunk.

// Journal kinds of reviews (package agent defines their data).
const (
	JournalAmbiguous = "ambiguous"
	JournalReview    = "review"
)

// ErrNoReview reports that a run or step has no ambiguous call waiting
// for a review.
var ErrNoReview = errors.New("rath: no tool call waits for a review")

// PendingReview is an ambiguous call a step waits on.
type PendingReview struct {
	StepID string
	Round  int
	CallID string
	// Worker is the worker that found the call ambiguous.
	Worker string
	// Data is the journal entry's data (agent.AmbiguousError as JSON).
	Data []byte
}

// NeedsReview records that running step stepID stopped on the ambiguous
// call (round, callID), described by data: the journal gets the entry and
// the step waits; its run waits unless another of its steps runs.
// Recording it again is a no-op; a step that has ended returns
// ErrTerminal.
func (s *Store) NeedsReview(ctx context.Context, stepID string, round int, callID, worker string, data []byte) (Run, error) {
	if len(data) > maxJournalData {
		return Run{}, fmt.Errorf("needs review %s: %d bytes of data, over the limit of %d", stepID, len(data), maxJournalData)
	}
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
			return fmt.Errorf("needs review %s: it is %s: %w", stepID, st.Status, ErrTerminal)
		}
		now := s.ts()
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO step_journal (step_id, round, call_id, kind, worker, data, recorded_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
			 ON CONFLICT (step_id, round, call_id, kind) DO UPDATE SET worker = excluded.worker, data = excluded.data, recorded_at = excluded.recorded_at`,
			stepID, round, callID, JournalAmbiguous, worker, string(data), now); err != nil {
			return fmt.Errorf("needs review %s: record the call: %w", stepID, err)
		}
		if _, err := tx.ExecContext(ctx,
			`UPDATE steps SET status = 'waiting', updated_at = $2 WHERE id = $1`, stepID, now); err != nil {
			return fmt.Errorf("needs review %s: %w", stepID, err)
		}
		return s.settleWaiting(ctx, tx, st.RunID, now)
	})
	if err != nil {
		return Run{}, err
	}
	return getRun(ctx, s.db, runID)
}

// PendingReviews returns the ambiguous calls the run's waiting steps wait
// on (none: the run waits for no review), in step order.
func (s *Store) PendingReviews(ctx context.Context, runID string) ([]PendingReview, error) {
	if _, err := getRun(ctx, s.db, runID); err != nil {
		return nil, err
	}
	return pendingReviews(ctx, s.db, runID, "")
}

func pendingReviews(ctx context.Context, q rowsQueryer, runID, stepID string) ([]PendingReview, error) {
	return queryAll(ctx, q, "pending reviews of "+runID, func(sc scanner) (PendingReview, error) {
		var p PendingReview
		var data string
		err := sc.Scan(&p.StepID, &p.Round, &p.CallID, &p.Worker, &data)
		p.Data = []byte(data)
		return p, err
	}, `SELECT j.step_id, j.round, j.call_id, j.worker, j.data
	      FROM step_journal j JOIN steps s ON s.id = j.step_id
	     WHERE s.run_id = $1 AND s.status = 'waiting' AND j.kind = 'ambiguous' AND ($2 = '' OR s.id = $2)
	       AND NOT EXISTS (SELECT 1 FROM step_journal r WHERE r.step_id = j.step_id AND r.round = j.round
	                       AND r.call_id = j.call_id AND r.kind = 'review')
	     ORDER BY s.ordinal, s.id, j.round, j.call_id`, runID, stepID)
}

// Review records the decision data (agent.Review as JSON) on the
// ambiguous call (round, callID) step stepID waits on, and makes the step
// pending again: the caller publishes its job (the reconciler does, if
// the caller dies first), and the resumed step reads the decision from
// its journal. The run goes back to running. A step that waits on no such
// call returns ErrNoReview; a run that has ended, ErrTerminal.
func (s *Store) Review(ctx context.Context, stepID string, round int, callID, by string, data []byte) (Step, error) {
	if len(data) > maxJournalData {
		return Step{}, fmt.Errorf("review %s: %d bytes of data, over the limit of %d", stepID, len(data), maxJournalData)
	}
	var out Step
	err := s.tx(ctx, func(tx *sql.Tx) error {
		st, err := getStep(ctx, tx, stepID)
		if err != nil {
			return err
		}
		r, err := getRun(ctx, tx, st.RunID)
		if err != nil {
			return err
		}
		if r.Status.Terminal() {
			return fmt.Errorf("review step %s: run %s is %s: %w", stepID, r.ID, r.Status, ErrTerminal)
		}
		ps, err := pendingReviews(ctx, tx, st.RunID, stepID)
		if err != nil {
			return err
		}
		found := false
		for _, p := range ps {
			found = found || p.Round == round && p.CallID == callID
		}
		if !found {
			return fmt.Errorf("step %s, round %d, call %q: %w", stepID, round, callID, ErrNoReview)
		}
		now := s.ts()
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO step_journal (step_id, round, call_id, kind, worker, data, recorded_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			stepID, round, callID, JournalReview, by, string(data), now); err != nil {
			return fmt.Errorf("review step %s: record the decision: %w", stepID, err)
		}
		if len(ps) == 1 {
			if _, err := tx.ExecContext(ctx,
				`UPDATE steps SET status = 'pending', updated_at = $2 WHERE id = $1`, stepID, now); err != nil {
				return fmt.Errorf("review step %s: %w", stepID, err)
			}
			if err := s.settleWaiting(ctx, tx, st.RunID, now); err != nil {
				return err
			}
		}
		out, err = getStep(ctx, tx, stepID)
		return err
	})
	return out, err
}

// ReviewMsgID is the job message id to publish a reviewed step under:
// the step's own id is in the bus's dedupe window from its first publish.
func ReviewMsgID(stepID string, round int, callID string) string {
	return fmt.Sprintf("%s/review/%d/%s", stepID, round, callID)
}
