package runs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/pgstore"
)

// Store records runs and steps in a database/sql database whose schema the
// migrations created (tables runs, steps, leases). It is safe for concurrent
// use.
type Store struct {
	db  *sql.DB
	now func() time.Time
	// relaxed: the database is Postgres, where the transactions of
	// StartStep and CommitStep skip waiting for their WAL flush.
	relaxed bool
	// epoch decides whether StartStep's one statement on Postgres reads
	// the redaction epoch too (startStepEpochSQL), as the store's role
	// may once the schema has it (epoch.go).
	epoch epochProbe
	// journal groups concurrent journal appends (journal.go), starts
	// concurrent step starts (fastpath.go); Postgres.
	journal *coalescer[*journalAppend]
	starts  *coalescer[*startCall]
	// stats has the hot tables' statistics taken as the store grows, so
	// that the plans made on a new store are made anew (statistics.go).
	stats statistics
}

// NewStore returns a Store over db. now is the clock (time.Now when nil).
func NewStore(db *sql.DB, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	s := &Store{db: db, now: now}
	s.journal = &coalescer[*journalAppend]{max: maxJournalGroup, inFlight: groupsInFlight, send: func(ctx context.Context, as []*journalAppend) error {
		return s.insertJournal(ctx, as...)
	}}
	s.starts = &coalescer[*startCall]{max: maxStartGroup, inFlight: groupsInFlight, send: s.startSteps}
	return s
}

// groupsInFlight is how many journal or start statements a store has in
// flight at once (coalescer): two, so that one held up (a row locked
// elsewhere, a connection gone silent) does not hold every step of the
// process behind it.
const groupsInFlight = 2

func (s *Store) ts() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// Create records a run and its first steps atomically. Runs are created
// pending; steps pending.
func (s *Store) Create(ctx context.Context, r *Run, steps []Step) error {
	return s.tx(ctx, func(tx *sql.Tx) error { return s.CreateIn(ctx, tx, r, steps) })
}

// Execer runs a statement inside a caller's transaction. *sql.Tx is one;
// the graph stores' transactions (store.Store.Tx) offer one too, so a run
// can be recorded in the same transaction as the session it reads.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// CreateIn is [Store.Create] inside the caller's transaction tx, which must
// be on this store's database; the run exists once tx commits. On error the
// caller must roll tx back.
func (s *Store) CreateIn(ctx context.Context, tx Execer, r *Run, steps []Step) error {
	for _, st := range s.createStmts(r, steps) {
		if _, err := tx.ExecContext(ctx, st.SQL, st.Args...); err != nil {
			return fmt.Errorf("%s: %w", st.what, err)
		}
	}
	return nil
}

// CreateStmts returns the statements that record r and its first steps
// (filling in their states, times and ids as [Store.Create] does), for a
// caller that runs them in a transaction of its own: a graph store's
// PutWith records a submitted session and its run in one commit.
func (s *Store) CreateStmts(r *Run, steps []Step) []pgstore.Stmt {
	stmts := s.createStmts(r, steps)
	out := make([]pgstore.Stmt, len(stmts))
	for i, st := range stmts {
		out[i] = pgstore.Stmt{SQL: st.SQL, Args: st.Args, Rows: st.rows}
	}
	return out
}

type stmt struct {
	what string
	SQL  string
	Args []any
	// rows is the statement's multi-row form on Postgres ([pgstore.Stmt.Rows]).
	rows string
}

// insertRunsSQL and insertStepsSQL insert many runs or steps, one array
// parameter for each argument of the single-row statement, in order: a
// group commit's submissions record their runs and first steps with one
// statement each.
const (
	insertRunsSQL = `INSERT INTO runs (id, status, queue, target, input_id, error, created_at, updated_at, budget, kind, driver, workflow, deadline, trace_context, conversation_id)
SELECT t.id, t.status, t.queue, t.target, t.input_id, '', t.at, t.at, t.budget, t.kind, t.driver, t.workflow, t.deadline, t.trace_context, t.conversation_id
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::uuid[], $6::timestamptz[], $7::text[], $8::text[], $9::text[], $10::text[],
	$11::timestamptz[], $12::text[], $13::text[])
	WITH ORDINALITY AS t(id, status, queue, target, input_id, at, budget, kind, driver, workflow, deadline, trace_context, conversation_id, n)
ORDER BY t.n`
	insertStepsSQL = `INSERT INTO steps (id, run_id, ordinal, status, input_id, attempts, worker, error, created_at, updated_at, target)
SELECT t.id, t.run_id, t.ordinal, t.status, t.input_id, 0, '', '', t.at, t.at, t.target
FROM unnest($1::text[], $2::text[], $3::integer[], $4::text[], $5::uuid[], $6::timestamptz[], $7::text[])
	WITH ORDINALITY AS t(id, run_id, ordinal, status, input_id, at, target, n)
ORDER BY t.n`
)

func (s *Store) createStmts(r *Run, steps []Step) []stmt {
	now := s.ts()
	r.Status, r.CreatedAt, r.UpdatedAt = RunPending, now, now
	if r.Kind == "" {
		r.Kind = KindAgent
	}
	var deadline any
	if r.Deadline != nil {
		d := r.Deadline.UTC().Truncate(time.Microsecond)
		r.Deadline, deadline = &d, d
	}
	out := []stmt{{
		what: "insert run " + r.ID,
		SQL: `INSERT INTO runs (id, status, queue, target, input_id, error, created_at, updated_at, budget, kind, driver, workflow, deadline, trace_context, conversation_id)
		 VALUES ($1, $2, $3, $4, $5, '', $6, $6, $7, $8, $9, $10, $11, $12, $13)`,
		Args: []any{r.ID, string(r.Status), r.Queue, string(r.Target), r.Input.String(), now, budgetText(r.Budget),
			string(r.Kind), r.Driver, r.Workflow, deadline, r.TraceContext, r.Conversation},
		rows: insertRunsSQL,
	}}
	for i := range steps {
		st := &steps[i]
		st.RunID, st.Status, st.CreatedAt, st.UpdatedAt = r.ID, StepPending, now, now
		if st.ID == "" {
			st.ID = StepID(r.ID, st.Ordinal)
		}
		st.Key = strings.TrimPrefix(st.ID, r.ID+"/")
		out = append(out, insertStepStmt(st))
	}
	r.Steps = steps
	return out
}

func insertStepStmt(st *Step) stmt {
	return stmt{
		what: "insert step " + st.ID,
		SQL: `INSERT INTO steps (id, run_id, ordinal, status, input_id, attempts, worker, error, created_at, updated_at, target)
		 VALUES ($1, $2, $3, $4, $5, 0, '', '', $6, $6, $7)`,
		Args: []any{st.ID, st.RunID, st.Ordinal, string(st.Status), st.Input.String(), st.CreatedAt, string(st.Target)},
		rows: insertStepsSQL,
	}
}

func insertStep(ctx context.Context, tx Execer, st *Step) error {
	in := insertStepStmt(st)
	if _, err := tx.ExecContext(ctx, in.SQL, in.Args...); err != nil {
		return fmt.Errorf("%s: %w", in.what, err)
	}
	return nil
}

// Get returns a run with its steps in ordinal order.
func (s *Store) Get(ctx context.Context, id string) (Run, error) {
	r, err := getRun(ctx, s.db, id)
	if err != nil {
		return Run{}, err
	}
	r.Steps, err = s.steps(ctx, id)
	return r, err
}

// ListParams filter and page [Store.List].
type ListParams struct {
	// Limit caps the result; default 50, at most 1000.
	Limit int
	// Before pages backwards: only runs created before this run id.
	Before string
	// Status lists only runs in this state as List shows it:
	// RunNeedsReview lists the waiting runs a review decides, RunWaiting
	// the other waiting runs.
	Status RunStatus
}

// List returns runs newest first, without their steps. A waiting run one
// of whose waiting steps stopped on an ambiguous call no review has
// decided yet is listed as RunNeedsReview (derived in the same query,
// never stored; [Store.PendingReviews] lists the calls).
func (s *Store) List(ctx context.Context, p ListParams) ([]Run, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 1000)
	q, state := listSQL(p.Status)
	return queryAll(ctx, s.db, "list runs", func(sc scanner) (Run, error) {
		var review int
		r, err := scanRun(extraScanner{sc, []any{&review}})
		if err == nil && review == 1 {
			r.Status = RunNeedsReview
		}
		return r, err
	}, q, string(p.Status), p.Before, limit, state)
}

// listSQL is List's statement for a status ($1 the status, $2 the page's
// end, $3 the limit, $4 the state it returns). A status is looked up by
// its state (runs_state_idx; migration 00026), an open one among the open
// runs.
func listSQL(status RunStatus) (q, state string) {
	state = string(status)
	if !status.Terminal() {
		state = "open"
	}
	where := `($1 = '' OR (state = $4 AND status = $1))`
	switch status {
	case RunNeedsReview:
		where = `($1 <> '' AND state = $4 AND status = 'waiting' AND (` + reviewProbe + `) = 1)`
	case RunWaiting:
		where = `($1 <> '' AND state = $4 AND status = 'waiting' AND (` + reviewProbe + `) IS NULL)`
	}
	// The CASE probes the journal only for the page's waiting runs, one
	// indexed lookup each: a scalar subquery, which Postgres never turns
	// into a hashed scan of every waiting step (it may for an EXISTS) and
	// plans quickly; the filters probe the open runs (runs_state_idx) the
	// same way.
	q = `SELECT ` + runCols + `, CASE WHEN status <> 'waiting' THEN 0 WHEN (` + reviewProbe + `) = 1 THEN 1 ELSE 0 END
	        FROM runs WHERE ` + where + ` AND ($2 = '' OR id < $2) ORDER BY id DESC LIMIT $3`
	return q, state
}

// reviewProbe is 1, in a query over runs, for a run one of whose waiting
// steps waits on an ambiguous call without a review (what pendingReviews
// lists), else NULL. The journal's key and steps_run_idx answer it.
const reviewProbe = `SELECT 1 FROM steps s JOIN step_journal j ON j.step_id = s.id
	 WHERE s.run_id = runs.id AND s.status = 'waiting' AND j.kind = 'ambiguous'
	   AND NOT EXISTS (SELECT 1 FROM step_journal d WHERE d.step_id = j.step_id AND d.round = j.round
	                   AND d.call_id = j.call_id AND d.kind = 'review')
	 LIMIT 1`

// extraScanner scans a row into a scanner's columns, then into extra.
type extraScanner struct {
	sc    scanner
	extra []any
}

func (e extraScanner) Scan(dest ...any) error {
	return e.sc.Scan(append(dest, e.extra...)...)
}

// GetStep returns one step.
func (s *Store) GetStep(ctx context.Context, id string) (Step, error) {
	return getStep(ctx, s.db, id)
}

// StartStep marks a step running on worker and counts the attempt; a
// pending run becomes running. A step or run that has ended returns
// ErrTerminal with the stored step, so the worker can settle the delivery.
func (s *Store) StartStep(ctx context.Context, stepID, worker string) (Step, error) {
	return s.startStep(ctx, stepID, worker, nil)
}

// StartStepReadingInput is StartStep that, on Postgres, also reads the
// step's input into in when the input has no base (its transcript is its
// own chunks), in the start's statement ([pgstore.StepInputCols]): a
// worker whose graph shares this store's database seeds its cache with it
// ([pgstore.Store.SeedInput]) instead of reading the input next, with a
// round trip and two statements of its own. in holds nothing when the
// input was not read so (another input, a start that took the general
// path, SQLite, a schema without the redaction epoch).
func (s *Store) StartStepReadingInput(ctx context.Context, stepID, worker string, in *pgstore.InputScan) (Step, error) {
	return s.startStep(ctx, stepID, worker, in)
}

func (s *Store) startStep(ctx context.Context, stepID, worker string, in *pgstore.InputScan) (Step, error) {
	if s.relaxed {
		// Postgres: the common case in one statement (fastpath.go).
		st, ok, err := s.startStepFast(ctx, stepID, worker, in)
		if ok || err != nil {
			return st, err
		}
	}
	var st Step
	expired := false
	err := s.relaxedTx(ctx, func(tx *sql.Tx) error {
		if !s.relaxed {
			// SQLite: the common case in two statements (sqlitepath.go).
			var ok bool
			var err error
			if st, ok, err = s.startStepPlain(ctx, tx, stepID, worker); ok || err != nil {
				return err
			}
		}
		var err error
		if st, err = getStep(ctx, tx, stepID); err != nil {
			return err
		}
		r, err := getRun(ctx, tx, st.RunID)
		if err != nil {
			return err
		}
		// A waiting step is never started again: its job is done (a
		// redelivery of it is acked); its continuation step resumes it.
		if st.Status.Terminal() || st.Status == StepWaiting || r.Status.Terminal() {
			return fmt.Errorf("step %s is %s (run %s): %w", stepID, st.Status, r.Status, ErrTerminal)
		}
		now := s.ts()
		if r.Deadline != nil && !now.Before(*r.Deadline) {
			// Committed, then reported as ErrTerminal below.
			expired = true
			st.Status = StepCanceled
			return endRun(ctx, tx, r.ID, RunTimedOut, "deadline passed", now)
		}
		if _, err := tx.ExecContext(ctx,
			`UPDATE steps SET status = 'running', attempts = attempts + 1, worker = $2,
			 started_at = COALESCE(started_at, $3), updated_at = $3 WHERE id = $1`,
			stepID, worker, now); err != nil {
			return fmt.Errorf("start step %s: %w", stepID, err)
		}
		if r.Status == RunPending {
			if _, err := tx.ExecContext(ctx,
				`UPDATE runs SET status = 'running', updated_at = $2 WHERE id = $1 AND status = 'pending'`,
				st.RunID, now); err != nil {
				return fmt.Errorf("start run %s: %w", st.RunID, err)
			}
		}
		// The row as the UPDATE left it, without reading it back: every
		// round trip inside the transaction holds its row locks longer.
		st.Status, st.Attempts, st.Worker, st.UpdatedAt = StepRunning, st.Attempts+1, worker, now
		if st.StartedAt == nil {
			st.StartedAt = &now
		}
		return nil
	})
	if err == nil && expired {
		err = fmt.Errorf("step %s: run %s passed its deadline: %w", stepID, st.RunID, ErrTerminal)
	}
	return st, err
}

// CommitStep records that the step's version was committed. When no step of
// the run is left unfinished, the run succeeds with the output of its last
// step. Committing a committed step again is a no-op. The returned run has
// no Steps (read them with Get).
func (s *Store) CommitStep(ctx context.Context, stepID string, output session.ID) (Run, error) {
	var r Run
	err := s.relaxedTx(ctx, func(tx *sql.Tx) error {
		st, err := getStep(ctx, tx, stepID)
		if err != nil {
			return err
		}
		if !st.Status.Terminal() {
			// Pruned first: a worker role may rewrite the journal of a
			// running step only (migration 00024).
			if err := pruneJournal(ctx, tx, stepID); err != nil {
				return err
			}
			now := s.ts()
			if _, err := tx.ExecContext(ctx,
				`UPDATE steps SET status = 'committed', output_id = $2, error = '', finished_at = $3, updated_at = $3 WHERE id = $1`,
				stepID, output.String(), now); err != nil {
				return fmt.Errorf("commit step %s: %w", stepID, err)
			}
			if err := settleRun(ctx, tx, st.RunID, now); err != nil {
				return err
			}
		}
		r, err = getRun(ctx, tx, st.RunID)
		return err
	})
	if err != nil {
		return Run{}, err
	}
	return r, nil
}

// settleRunSQL ends agent run $1 when its steps have all ended and none
// failed: succeeded with the last step's output, at $2. Workflow runs are
// ended by their driver.
const settleRunSQL = `UPDATE runs SET status = 'succeeded', updated_at = $2,
	output_id = (SELECT output_id FROM steps WHERE run_id = $1 ORDER BY ordinal DESC LIMIT 1)
WHERE id = $1 AND kind = 'agent' AND status IN ('pending','running','waiting')
  AND NOT EXISTS (SELECT 1 FROM steps WHERE run_id = $1 AND status IN ('pending','running','waiting','failed'))`

// settleRun ends an agent run whose steps have all ended (settleRunSQL).
func settleRun(ctx context.Context, tx Execer, runID string, now time.Time) error {
	if _, err := tx.ExecContext(ctx, settleRunSQL, runID, now); err != nil {
		return fmt.Errorf("settle run %s: %w", runID, err)
	}
	return nil
}

// FailStep records a step's terminal failure and fails its run with reason.
func (s *Store) FailStep(ctx context.Context, stepID, reason string) (Run, error) {
	var runID string
	err := s.tx(ctx, func(tx *sql.Tx) error {
		st, err := getStep(ctx, tx, stepID)
		if err != nil {
			return err
		}
		runID = st.RunID
		if st.Status.Terminal() {
			return nil
		}
		now := s.ts()
		if _, err := tx.ExecContext(ctx,
			`UPDATE steps SET status = 'failed', error = $2, finished_at = $3, updated_at = $3 WHERE id = $1`,
			stepID, reason, now); err != nil {
			return fmt.Errorf("fail step %s: %w", stepID, err)
		}
		// A workflow's driver sees the failed step and decides.
		_, err = tx.ExecContext(ctx,
			`UPDATE runs SET status = 'failed', error = $2, updated_at = $3
			 WHERE id = $1 AND status IN ('pending','running','waiting') AND kind = 'agent'`,
			st.RunID, fmt.Sprintf("step %s: %s", stepID, reason), now)
		return err
	})
	if err != nil {
		return Run{}, err
	}
	return s.Get(ctx, runID)
}

// Cancel ends a run and its unfinished steps. Canceling an ended run returns
// ErrTerminal.
func (s *Store) Cancel(ctx context.Context, runID string) (Run, error) {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		r, err := getRun(ctx, tx, runID)
		if err != nil {
			return err
		}
		if r.Status.Terminal() {
			return fmt.Errorf("cancel run %s: it is %s: %w", runID, r.Status, ErrTerminal)
		}
		return endRun(ctx, tx, runID, RunCanceled, "", s.ts())
	})
	if err != nil {
		return Run{}, err
	}
	return s.Get(ctx, runID)
}

// Stale returns unfinished steps not updated since before, oldest first:
// candidates for republishing by the reconciler.
//
// It reads the open runs' steps (runs_state_idx, then steps_run_idx): a
// step of a run that has ended has nothing left to recover (its start
// would refuse it). No index of steps covers status or updated_at, so a
// step's start, heartbeats and commit rewrite its row without touching
// any index (HOT updates on Postgres; migration 00025). The pass costs a
// read of the open runs' steps, once a reconcile interval.
func (s *Store) Stale(ctx context.Context, before time.Time, limit int) ([]Step, error) {
	return queryAll(ctx, s.db, "stale steps", scanStep, staleSQL, before.UTC(), limit)
}

// staleSQL is Stale's statement: $1 the time, $2 the limit.
const staleSQL = `SELECT ` + stepCols + ` FROM steps
	WHERE run_id IN (SELECT id FROM runs WHERE state = 'open')
	  AND status IN ('pending','running') AND updated_at < $1
	ORDER BY updated_at LIMIT $2`

// Touch marks an unfinished step as just handled (a worker's heartbeat, a
// republish), so the reconciler does not pick it again before its
// interval. A step that has ended (canceled with its run, or its run timed
// out) returns ErrTerminal: the worker running it aborts.
func (s *Store) Touch(ctx context.Context, stepID string) error {
	res, err := s.db.ExecContext(ctx,
		`UPDATE steps SET updated_at = $2 WHERE id = $1 AND status IN ('pending','running','waiting')`, stepID, s.ts())
	if err != nil {
		return fmt.Errorf("touch step %s: %w", stepID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return err
	}
	st, err := getStep(ctx, s.db, stepID)
	if err != nil {
		return err
	}
	if st.Status == StepCommitted {
		return fmt.Errorf("step %s is committed: %w (%w)", stepID, ErrCommitted, ErrTerminal)
	}
	return fmt.Errorf("step %s is %s: %w", stepID, st.Status, ErrTerminal)
}

// AcquireLease takes or renews the named lease for holder until now+ttl. It
// returns true when holder holds the lease afterwards. A lease whose holder
// stopped renewing it passes to the next caller after it expires.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	now := s.ts()
	res, err := s.db.ExecContext(ctx,
		`INSERT INTO leases (name, holder, expires_at) VALUES ($1, $2, $3)
		 ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
		 WHERE leases.holder = excluded.holder OR leases.expires_at < $4`,
		name, holder, now.Add(ttl), now)
	if err != nil {
		return false, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	return n == 1, nil
}

// ReleaseLease gives up the named lease when holder holds it, so that
// another holder takes it at its next try instead of after the lease
// expires (a service stopping hands its work over). A lease held by
// another is left alone.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM leases WHERE name = $1 AND holder = $2`, name, holder); err != nil {
		return fmt.Errorf("release lease %s: %w", name, err)
	}
	return nil
}

func (s *Store) steps(ctx context.Context, runID string) ([]Step, error) {
	return queryAll(ctx, s.db, fmt.Sprintf("steps of %s", runID), scanStep, `SELECT `+stepCols+` FROM steps WHERE run_id = $1 ORDER BY ordinal`, runID)
}

func (s *Store) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	return s.txMode(ctx, false, fn)
}

// relaxedTx runs fn in a transaction whose commit, on Postgres, does not
// wait for its WAL flush (synchronous_commit off): a crash may lose the
// last such commits, never corrupt them. Only the worker's bookkeeping uses
// it — marking a step running and recording its commit — because both are
// recovered after a crash: the version itself is committed durably by the
// graph store first, the job is redelivered or the reconciler settles the
// step from the version keyed by its id. A run's creation never uses it.
func (s *Store) relaxedTx(ctx context.Context, fn func(*sql.Tx) error) error {
	return s.txMode(ctx, s.relaxed, fn)
}

func (s *Store) txMode(ctx context.Context, relaxed bool, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if relaxed {
		if _, err := tx.ExecContext(ctx, `SET LOCAL synchronous_commit TO OFF`); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("relax commit: %w", err)
		}
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

type queryer interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

type scanner interface{ Scan(dest ...any) error }

// execQueryer is a *sql.Tx, or the transaction of a graph store's write
// that runs the caller's statements too (sqlitestore.Execer).
type execQueryer interface {
	Execer
	queryer
	rowsQueryer
}

// rowsQueryer is a *sql.DB or a *sql.Tx.
type rowsQueryer interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// queryAll runs a query and scans every row with scan; what names the query
// in errors.
func queryAll[T any](ctx context.Context, db rowsQueryer, what string, scan func(scanner) (T, error), q string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

const runCols = `id, status, queue, target, input_id, output_id, error, created_at, updated_at, budget, kind, driver, workflow, deadline, changes_accepted_at, trace_context, conversation_id`

func getRun(ctx context.Context, q queryer, id string) (Run, error) {
	r, err := scanRun(q.QueryRowContext(ctx, `SELECT `+runCols+` FROM runs WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, fmt.Errorf("run %q: %w", id, ErrNotFound)
	}
	return r, err
}

func scanRun(sc scanner) (Run, error) {
	var r Run
	var target, input, budget, kind string
	var output sql.NullString
	var deadline, accepted sql.NullTime
	if err := sc.Scan(&r.ID, &r.Status, &r.Queue, &target, &input, &output, &r.Error, &r.CreatedAt, &r.UpdatedAt, &budget,
		&kind, &r.Driver, &r.Workflow, &deadline, &accepted, &r.TraceContext, &r.Conversation); err != nil {
		return Run{}, err
	}
	if accepted.Valid {
		a := accepted.Time.UTC()
		r.ChangesAcceptedAt = &a
	}
	r.Kind = RunKind(kind)
	if deadline.Valid {
		d := deadline.Time.UTC()
		r.Deadline = &d
	}
	r.Target = []byte(target)
	var err error
	if budget != "" {
		if err := json.Unmarshal([]byte(budget), &r.Budget); err != nil {
			return Run{}, fmt.Errorf("run %s: budget: %w", r.ID, err)
		}
	}
	if r.Input, err = session.ParseID(input); err != nil {
		return Run{}, err
	}
	if r.Output, err = parseNullID(output); err != nil {
		return Run{}, err
	}
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	return r, nil
}

const stepCols = `id, run_id, ordinal, status, input_id, output_id, attempts, worker, error, created_at, updated_at, started_at, finished_at, target, digest`

func getStep(ctx context.Context, q queryer, id string) (Step, error) {
	st, err := scanStep(q.QueryRowContext(ctx, `SELECT `+stepCols+` FROM steps WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Step{}, fmt.Errorf("step %q: %w", id, ErrNotFound)
	}
	return st, err
}

func scanStep(sc scanner) (Step, error) {
	var st Step
	var input, target string
	var output sql.NullString
	var started, finished sql.NullTime
	if err := sc.Scan(&st.ID, &st.RunID, &st.Ordinal, &st.Status, &input, &output, &st.Attempts, &st.Worker,
		&st.Error, &st.CreatedAt, &st.UpdatedAt, &started, &finished, &target, &st.Digest); err != nil {
		return Step{}, err
	}
	st.Key = strings.TrimPrefix(st.ID, st.RunID+"/")
	if target != "" {
		st.Target = json.RawMessage(target)
	}
	var err error
	if st.Input, err = session.ParseID(input); err != nil {
		return Step{}, err
	}
	if st.Output, err = parseNullID(output); err != nil {
		return Step{}, err
	}
	st.CreatedAt, st.UpdatedAt = st.CreatedAt.UTC(), st.UpdatedAt.UTC()
	if started.Valid {
		t := started.Time.UTC()
		st.StartedAt = &t
	}
	if finished.Valid {
		t := finished.Time.UTC()
		st.FinishedAt = &t
	}
	return st, nil
}

func parseNullID(s sql.NullString) (*session.ID, error) {
	if !s.Valid || strings.TrimSpace(s.String) == "" {
		return nil, nil
	}
	id, err := session.ParseID(s.String)
	if err != nil {
		return nil, err
	}
	return &id, nil
}

// budgetText is a budget as stored: JSON, or the empty string for none.
func budgetText(b Budget) string {
	if b.IsZero() {
		return ""
	}
	raw, _ := json.Marshal(b)
	return string(raw)
}
