package runs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/pgstore"
)

// The step hot path on Postgres. A step's bookkeeping used to cost two
// transactions of several round trips each (StartStep, CommitStep) next to
// the version's own commit. Here it is one statement to start the step
// (committed without waiting for its WAL flush) and none of its own to
// commit it: the step's record rides in the version's commit
// ([Store.CommitStepVersion]), and the steps whose versions commit in one
// group are recorded by one statement (commitStepsSQL). Anything unusual
// — a step that ended, a passed deadline, a replayed commit — falls back
// to the general code, which decides and reports exactly as before.

// startStepSQL marks a startable step running and its pending run running,
// in one statement (startStepEpochSQL also reads the graph's redaction
// epoch for the worker's cache: Step.RedactionEpoch, so the input's read
// needs no statement of its own). It matches only a step that is pending or running of a
// run that has not ended and whose deadline has not passed; any other case
// returns no row and StartStep takes the general path. set_config makes
// this statement's own transaction commit without waiting for its WAL
// flush (SET LOCAL synchronous_commit, without the extra round trip): see
// [Store.relaxedTx] for why that is safe for this bookkeeping.
const startStepSQL = startStepHead + `SELECT ` + stepCols + ` FROM st`

// startable is the start statements' condition on a step ($3 the time):
// not waiting or ended, of a run that has not ended and whose deadline has
// not passed, and the relaxed commit set (relax).
const startable = `status NOT IN ('waiting','committed','failed','canceled')
	  AND (SELECT v FROM relax) IS NOT NULL
	  AND (SELECT r.status IN ('pending','running','waiting') AND (r.deadline IS NULL OR r.deadline > $3)
		FROM runs r WHERE r.id = steps.run_id)`

// startStepHead is the start statement's part before its SELECT.
//
// Its conditions are written so that every row is found by its key, in
// the plan Postgres keeps for the prepared statement too: the step's
// status as "not waiting or ended" (the same set as pending or running,
// by the table's CHECK, but one the planner cannot match to an index's
// predicate on it), the run as a lookup by id. Written the plain way, the
// cached plan scanned steps_open_idx and runs_status_idx (gone since
// migrations 00025 and 00026) for every open step or run, and those
// indexes kept an entry per status change until vacuum removed the dead
// ones: the start and the commit (commitStepSQL, likewise) grew with the
// runs of the last minutes, to 130 and 550 µs a statement after 30 s at
// 1,000 steps/s (issue 25).
const startStepHead = `WITH relax AS (SELECT set_config('synchronous_commit', 'off', true) AS v),
st AS (
	UPDATE steps SET status = 'running', attempts = attempts + 1, worker = $2,
		started_at = COALESCE(started_at, $3), updated_at = $3
	WHERE id = $1 AND ` + startable + `
	RETURNING ` + stepCols + `
),
run AS (
	UPDATE runs SET status = 'running', updated_at = $3
	WHERE id = (SELECT run_id FROM st) AND status = 'pending'
)
`

// startStepEpochSQL is startStepSQL reading the graph's redaction epoch
// too, where the store's role may read it (Store.epoch: epoch.go).
const startStepEpochSQL = startStepHead + `SELECT ` + stepCols + `, (SELECT epoch FROM redaction_epoch) FROM st`

// scanAlso scans a row into a scanStep's columns and then into also.
type scanAlso struct {
	sc   scanner
	also []any
}

func (s scanAlso) Scan(dest ...any) error { return s.sc.Scan(append(dest, s.also...)...) }

// pruneJournalSQL is pruneJournal as one statement, for the version's
// commit: it deletes the payload entries of step $1's journal and strips
// the text (arguments, a skip's result, a review's reason) from its
// ambiguous and review entries, when the step is about to commit (it runs
// before commitStepSQL: a worker role may rewrite the journal of a
// running step only, migration 00024).
const pruneJournalSQL = `WITH live AS (
	SELECT 1 FROM steps WHERE id = $1 AND status IN ('pending','running','waiting')
),
gone AS (
	DELETE FROM step_journal WHERE step_id = $1 AND kind IN ('reply', 'start', 'result') AND EXISTS (SELECT 1 FROM live)
)
UPDATE step_journal SET data = (data::jsonb - 'arguments' - 'result' - 'reason')::text
WHERE step_id = $1 AND kind IN ('ambiguous', 'review') AND EXISTS (SELECT 1 FROM live)`

// startStepsSQL is startStepSQL for several steps at once ($1 their ids,
// $2 their workers, $3 the time): steps that start together on Postgres
// share one statement (Store.starts). It returns a row for each step it
// started; the others take the general path, as with startStepSQL.
// startStepsEpochSQL reads the redaction epoch too. As in startStepHead,
// the runs are looked up by id: their status "pending" is written as not
// any other status (the table's CHECK), which the planner cannot match to
// an index by status (runs_status_idx until migration 00026;
// TestHotPathPlansUseKeys). The arrays reach unnest through a subquery
// that OFFSET 0 keeps apart, so that a connection runs the statement on
// its cached generic plan instead of planning it for each group's values
// (see pgstore's groupVersionsSQL; TestStartsUseTheCachedPlan).
const (
	startStepsHead = `WITH relax AS (SELECT set_config('synchronous_commit', 'off', true) AS v),
inp AS (SELECT t.* FROM (SELECT $1::text[] a1, $2::text[] a2 OFFSET 0) arr, unnest(arr.a1, arr.a2) AS t(sid, wkr)),
st AS (
	UPDATE steps SET status = 'running', attempts = attempts + 1, worker = inp.wkr,
		started_at = COALESCE(started_at, $3), updated_at = $3
	FROM inp
	WHERE steps.id = inp.sid AND ` + startable + `
	RETURNING ` + stepCols + `
),
run AS (
	UPDATE runs SET status = 'running', updated_at = $3
	WHERE id = ANY (ARRAY(SELECT run_id FROM st))
	  AND status NOT IN ('running','waiting','succeeded','failed','canceled','timed_out')
)
`
	startStepsSQL      = startStepsHead + `SELECT ` + stepCols + ` FROM st`
	startStepsEpochSQL = startStepsHead + `SELECT ` + stepCols + `, (SELECT epoch FROM redaction_epoch) FROM st`
)

// maxStartGroup bounds the steps one start statement takes.
const maxStartGroup = 256

// startCall is one StartStep's fast path: its step and worker, and what
// the start statement found (ok: the step was plainly startable and is
// started; st is it).
type startCall struct {
	stepID, worker string
	// input, when set, asks for the step's input with the start: the
	// statement's input columns are scanned into it.
	input *pgstore.InputScan
	st    Step
	ok    bool
}

// errStartedTwice refuses a group that would start one step twice: each
// call goes alone instead, one after the other.
var errStartedTwice = fmt.Errorf("a step is started twice in one group: %w", errSendAlone)

// startStepFast is StartStep's one-statement path; ok is false when the
// step is not plainly startable and the general path must decide. Starts
// that arrive while one is in flight share the next statement.
func (s *Store) startStepFast(ctx context.Context, stepID, worker string, input *pgstore.InputScan) (Step, bool, error) {
	c := &startCall{stepID: stepID, worker: worker, input: input}
	if err := s.starts.do(ctx, c); err != nil {
		return Step{}, false, fmt.Errorf("start step %s: %w", stepID, err)
	}
	return c.st, c.ok, nil
}

// startSteps runs the start statement for calls: startStepSQL for one,
// startStepsSQL for several.
func (s *Store) startSteps(ctx context.Context, calls []*startCall) error {
	var epoch sql.NullInt64
	withEpoch := s.epoch.known(ctx, s.db, s.now())
	if withEpoch && slices.ContainsFunc(calls, func(c *startCall) bool { return c.input != nil }) {
		return s.startStepsReading(ctx, calls)
	}
	if len(calls) == 1 {
		c := calls[0]
		var err error
		if withEpoch {
			row := s.db.QueryRowContext(ctx, startStepEpochSQL, c.stepID, c.worker, s.ts())
			c.st, err = scanStep(scanAlso{row, []any{&epoch}})
		} else {
			c.st, err = scanStep(s.db.QueryRowContext(ctx, startStepSQL, c.stepID, c.worker, s.ts()))
		}
		c.st.RedactionEpoch, c.st.EpochKnown = epoch.Int64, epoch.Valid
		c.ok = err == nil
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	}
	g, err := newStartGroup(calls)
	if err != nil {
		return err
	}
	q := startStepsSQL
	if withEpoch {
		q = startStepsEpochSQL
	}
	rows, err := s.db.QueryContext(ctx, q, g.ids, g.workers, s.ts())
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var sc scanner = rows
		if withEpoch {
			sc = scanAlso{rows, []any{&epoch}}
		}
		st, err := scanStep(sc)
		if err != nil {
			return err
		}
		if _, err := g.started(st, epoch); err != nil {
			return err
		}
	}
	return rows.Err()
}

// startGroup is the calls of one grouped start statement by step id, and
// the statement's arrays of step ids and workers.
type startGroup struct {
	byID         map[string]*startCall
	ids, workers []string
}

// newStartGroup groups calls; a group that would start one step twice is
// errStartedTwice.
func newStartGroup(calls []*startCall) (startGroup, error) {
	g := startGroup{byID: make(map[string]*startCall, len(calls)),
		ids: make([]string, len(calls)), workers: make([]string, len(calls))}
	for i, c := range calls {
		if g.byID[c.stepID] != nil {
			return startGroup{}, errStartedTwice
		}
		g.byID[c.stepID] = c
		g.ids[i], g.workers[i] = c.stepID, c.worker
	}
	return g, nil
}

// started records st, a row the statement returned with the redaction
// epoch it read, as its call's start and returns the call.
func (g startGroup) started(st Step, epoch sql.NullInt64) (*startCall, error) {
	c := g.byID[st.ID]
	if c == nil {
		return nil, fmt.Errorf("the start statement returned step %s, not asked for", st.ID)
	}
	st.RedactionEpoch, st.EpochKnown = epoch.Int64, epoch.Valid
	c.st, c.ok = st, true
	return c, nil
}

// The start statements that read their steps' inputs too (StepInputCols:
// an input without a base, with its chunks), for workers that would read
// them next: startStepsReading.
var (
	startStepInputSQL  = startStepHead + `SELECT ` + qualified("st", stepCols) + `, (SELECT epoch FROM redaction_epoch), ` + pgstore.StepInputCols + ` FROM st ` + pgstore.StepInputJoin
	startStepsInputSQL = startStepsHead + `SELECT ` + qualified("st", stepCols) + `, (SELECT epoch FROM redaction_epoch), ` + pgstore.StepInputCols + ` FROM st ` + pgstore.StepInputJoin
)

// qualified prefixes each of a comma-separated column list with alias.
func qualified(alias, cols string) string {
	parts := strings.Split(cols, ",")
	for i, p := range parts {
		parts[i] = alias + "." + strings.TrimSpace(p)
	}
	return strings.Join(parts, ", ")
}

// startStepsReading is startSteps with the steps' inputs read by the same
// statement (startStepInputSQL, startStepsInputSQL), on the connection's
// pgx interface: the input's arrays need pgx's codecs. Only called when
// the schema has the redaction epoch, which the input is read with. A call
// that did not ask for its input ignores the columns.
func (s *Store) startStepsReading(ctx context.Context, calls []*startCall) error {
	g, err := newStartGroup(calls)
	if err != nil {
		return err
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("the run store's driver connection is %T, not pgx's", dc)
		}
		var rows pgx.Rows
		var err error
		if len(calls) == 1 {
			rows, err = sc.Conn().Query(ctx, startStepInputSQL, calls[0].stepID, calls[0].worker, s.ts())
		} else {
			rows, err = sc.Conn().Query(ctx, startStepsInputSQL, g.ids, g.workers, s.ts())
		}
		if err != nil {
			return err
		}
		defer rows.Close()
		var epoch sql.NullInt64
		for rows.Next() {
			var in pgstore.InputScan
			st, err := scanStep(scanAlso{rows, append([]any{&epoch}, in.Dest()...)})
			if err != nil {
				return err
			}
			c, err := g.started(st, epoch)
			if err != nil {
				return err
			}
			if c.input != nil {
				*c.input = in
			}
		}
		return rows.Err()
	})
}

// commitStepSQL records a step committed and, for an agent run whose other
// steps have all committed, settles the run as succeeded with its last
// step's output; it returns the run as it is afterwards, and 1, the
// place of its one commit ([pgstore.Stmt.Row]). Every part of one
// statement sees the same snapshot, so the run's output is this step's
// unless a committed step with a higher ordinal exists, and the run as
// returned is the settled row when it settled. A step that has already
// ended is left alone (the run is still returned); a step that does not
// exist returns no row.
const commitStepSQL = `WITH st AS (
	UPDATE steps SET status = 'committed', output_id = $2, error = '', finished_at = $3, updated_at = $3
	WHERE id = $1 AND status IN ('pending','running','waiting')
	RETURNING run_id, ordinal
),
settled AS (
	UPDATE runs SET status = 'succeeded', updated_at = $3,
		output_id = COALESCE((SELECT o.output_id FROM steps o, st
			WHERE o.run_id = runs.id AND o.id <> $1 AND o.ordinal > st.ordinal
			ORDER BY o.ordinal DESC LIMIT 1), $2)
	WHERE id = (SELECT run_id FROM st) AND kind = 'agent' AND status IN ('pending','running','waiting')
	  AND NOT EXISTS (SELECT 1 FROM steps o WHERE o.run_id = runs.id AND o.id <> $1 AND o.status <> 'committed')
	RETURNING ` + runCols + `
)
SELECT ` + runCols + `, 1 FROM settled
UNION ALL
SELECT ` + runCols + `, 1 FROM runs WHERE id = (SELECT run_id FROM steps WHERE id = $1) AND NOT EXISTS (SELECT 1 FROM settled)`

// commitStepsSQL is commitStepSQL for the steps a group of version
// commits records ([pgstore.Stmt.Rows]), one array parameter for each of
// its arguments: it writes what commitStepSQL run for each step in the
// group's order would, and returns each step the row that would have
// returned, with the step's place in the arrays last. Run one by one, a
// run two of whose steps commit in one group settles at the later of the
// two, once the earlier is committed: here the run settles at the last of
// its steps the statement commits (last), when its other steps are
// committed or are among the statement's, with the output of its step of
// the highest ordinal; the steps before that one get the run as it was,
// and so does a step that had ended already and comes before it (one
// after it would have seen the run settled).
//
// Its plan, which a connection caches (a generic plan: the arrays' lengths
// unknown), must find every step and run by key, whatever the group's
// size and however small the tables were when it was made:
//   - The arrays reach unnest through a subquery that OFFSET 0 keeps
//     apart, as in the grouped starts, so the statement runs on its cached
//     plan and is not planned for each group.
//   - LIMIT cardinality($1), which keeps every row, makes the planner
//     count one row for arg, so it looks each step and run up by key.
//     Counted as ten rows, the plan made on a young database hashed a scan
//     of all of steps and runs, and kept doing so as they grew: 3.4 ms a
//     group of five after 10 s (issue 25, seventeenth round).
//   - No part reads another part's rows once for each of its own rows:
//     the steps the statement commits reach the settle as an array, and
//     the settled runs reach the rows returned as two (won). Joined to
//     each other, the parts' rows were scanned n² times, 3 ms of a group
//     of fifty's 13.
const commitStepsSQL = `WITH arg AS (
	SELECT t.* FROM (SELECT $1::text[] a1, $2::uuid[] a2, $3::timestamptz[] a3 OFFSET 0) arr,
		unnest(arr.a1, arr.a2, arr.a3) WITH ORDINALITY AS t(step_id, output_id, at, n)
	LIMIT cardinality($1::text[])
),
st AS (
	UPDATE steps SET status = 'committed', output_id = arg.output_id, error = '', finished_at = arg.at, updated_at = arg.at
	FROM arg
	WHERE steps.id = arg.step_id AND steps.status IN ('pending','running','waiting')
	RETURNING steps.id AS sid, steps.run_id AS srun, steps.ordinal AS sord, arg.output_id AS sout, arg.at AS sat, arg.n AS sn
),
last AS (
	SELECT DISTINCT ON (srun) * FROM st ORDER BY srun, sn DESC
),
settled AS (
	UPDATE runs SET status = 'succeeded', updated_at = last.sat,
		output_id = COALESCE((SELECT COALESCE(c.sout, o.output_id) FROM steps o LEFT JOIN st c ON c.sid = o.id
			WHERE o.run_id = runs.id AND o.id <> last.sid AND o.ordinal > last.sord
			ORDER BY o.ordinal DESC LIMIT 1), last.sout)
	FROM last
	WHERE runs.id = last.srun AND runs.kind = 'agent' AND runs.status IN ('pending','running','waiting')
	  AND NOT EXISTS (SELECT 1 FROM steps o WHERE o.run_id = runs.id AND o.status <> 'committed'
		AND o.id <> ALL (ARRAY(SELECT sid FROM st)))
	RETURNING ` + runCols + `, last.sn AS settler
),
won AS MATERIALIZED (
	SELECT coalesce(array_agg(id ORDER BY id), '{}') AS runs, coalesce(array_agg(settler ORDER BY id), '{}') AS settlers FROM settled
),
mem AS (
	SELECT arg.n, s.run_id, won.settlers[array_position(won.runs, s.run_id)] AS settler
	FROM arg JOIN steps s ON s.id = arg.step_id, won
)
SELECT ` + runCols + `, settler FROM settled
UNION ALL
SELECT ` + runCols + `, n FROM (
	SELECT z.*, m.n FROM (SELECT * FROM mem WHERE n > settler OFFSET 0) m JOIN settled z ON z.id = m.run_id
) after_settled
UNION ALL
SELECT ` + runCols + `, n FROM (
	SELECT r.*, m.n FROM mem m JOIN runs r ON r.id = m.run_id WHERE m.settler IS NULL OR m.n < m.settler
) unsettled`

// VersionPutter is a graph store that can run statements in a version's
// commit: the Postgres store ([pgstore.Store.PutWith]).
type VersionPutter interface {
	PutWith(ctx context.Context, v *session.Version, after ...pgstore.Stmt) (*session.Version, bool, error)
}

// CommitStepVersion commits v, the version step stepID made (keyed by the
// step id), and records the step committed (its journal pruned, as
// CommitStep prunes it) in the same transaction of g,
// which must be on this store's database: one fsync'd commit and one round
// trip where a Put and then [Store.CommitStep] take two commits and ~ten
// round trips. It returns the committed version and the run as CommitStep
// does. When v was committed before (a redelivered step) or the step is
// missing, it settles the step through CommitStep, as the separate calls
// would. On SQLite (no PutWith) use Put and CommitStep.
func (s *Store) CommitStepVersion(ctx context.Context, g VersionPutter, stepID string, v *session.Version) (*session.Version, Run, error) {
	return s.commitStepVersion(ctx, g, stepID, v, true)
}

// CommitStepVersionNoJournal is CommitStepVersion for a step whose
// journal the caller knows to be empty (a first attempt that recorded
// nothing: a single-call step records no entry): it leaves out the
// journal's prune, one statement less in the commit. The general path it
// falls back to prunes as always.
func (s *Store) CommitStepVersionNoJournal(ctx context.Context, g VersionPutter, stepID string, v *session.Version) (*session.Version, Run, error) {
	return s.commitStepVersion(ctx, g, stepID, v, false)
}

func (s *Store) commitStepVersion(ctx context.Context, g VersionPutter, stepID string, v *session.Version, prune bool) (*session.Version, Run, error) {
	var r Run
	found := false
	read := func(row pgx.CollectableRow) error {
		var place int64 // the row's place in its statement: this commit's
		var err error
		if r, err = scanRun(scanAlso{row, []any{&place}}); err != nil {
			return fmt.Errorf("commit step %s: %w", stepID, err)
		}
		found = true
		return nil
	}
	stmts := []pgstore.Stmt{{SQL: commitStepSQL, Rows: commitStepsSQL, Args: []any{stepID, v.ID.String(), s.ts()}, Row: read}}
	if prune {
		stmts = append([]pgstore.Stmt{{SQL: pruneJournalSQL, Args: []any{stepID}}}, stmts...)
	}
	got, ran, err := g.PutWith(ctx, v, stmts...)
	if err != nil {
		return nil, Run{}, err
	}
	if ran && found {
		s.grew(ctx)
		return got, r, nil
	}
	// A replayed commit (the version was there before), or a step that is
	// not there: the general path settles or reports it.
	r, err = s.CommitStep(ctx, stepID, got.ID)
	if err != nil {
		return nil, Run{}, err
	}
	return got, r, nil
}
