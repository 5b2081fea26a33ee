// Package check scans a Rath database and asserts the Session Graph's
// invariants (docs/architecture.md §3) and the runs bookkeeping that drives it:
//
//   - append-only: the triggers refusing UPDATE and DELETE (and TRUNCATE on
//     Postgres) exist on versions, chunks and lineage and are enabled;
//   - hash chain: every chunk and version hash recomputes from the stored
//     rows ([store.Store.Verify]);
//   - acyclic: no version is its own ancestor along lineage or base links;
//   - structure: every version stores exactly own_count chunks and
//     parent_count lineage rows; no chunk or lineage row names a missing
//     version (an orphan);
//   - exactly once: at most one version per step (by key and by producer);
//     a committed step's output is the version keyed by its id; a version
//     keyed by a step belongs to a step recorded committed with it; a failed
//     step records its reason; a succeeded run's output is its last step's;
//     a failed run records its reason;
//   - descent: a committed step's output descends from the step's input
//     (along lineage), so no step adopted a version made elsewhere.
//
// [Run] returns every violation as a [Problem] naming the rows. It reads
// only; it needs a role that can read pg_trigger (any role can).
package check

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/store/storeurl"
)

// Invariant names, as reported in [Problem.Invariant].
const (
	AppendOnly  = "append-only"
	HashChain   = "hash-chain"
	Acyclic     = "acyclic"
	Structure   = "structure"
	ExactlyOnce = "exactly-once"
	Descent     = "descent"
	Settled     = "settled"
)

// Problem is one violated invariant.
type Problem struct {
	Invariant string `json:"invariant"`
	// Row names the offending rows (table and id).
	Row    string `json:"row"`
	Detail string `json:"detail"`
}

func (p Problem) String() string { return fmt.Sprintf("%s: %s: %s", p.Invariant, p.Row, p.Detail) }

// Report is what [Run] found.
type Report struct {
	Versions int `json:"versions"`
	Chunks   int `json:"chunks"`
	Edges    int `json:"edges"`
	Runs     int `json:"runs"`
	Steps    int `json:"steps"`
	// Open counts steps still pending, running or waiting.
	Open     int       `json:"open_steps"`
	Problems []Problem `json:"problems,omitempty"`
}

// OK reports whether no invariant is violated.
func (r Report) OK() bool { return len(r.Problems) == 0 }

// Options tune [Run].
type Options struct {
	// Settled also requires every run and step to have ended: use it after
	// a test has waited for its runs.
	Settled bool
	// MaxProblems bounds the report (default 1000).
	MaxProblems int
}

// Run opens the database at url (postgres://… or sqlite:PATH), checks it
// and closes it. The error is for a database that cannot be read; violated
// invariants are in the report.
func Run(ctx context.Context, url string, opts Options) (Report, error) {
	st, err := storeurl.Open(ctx, url, storeurl.Options{})
	if err != nil {
		return Report{}, err
	}
	defer st.Close()
	_, db, err := runs.Open(ctx, url)
	if err != nil {
		return Report{}, err
	}
	defer db.Close()
	return Check(ctx, st, db, dialectOf(url), opts)
}

// Dialect is the database's SQL dialect.
type Dialect int

// Dialects.
const (
	Postgres Dialect = iota
	SQLite
)

func dialectOf(url string) Dialect {
	if strings.HasPrefix(url, "sqlite:") {
		return SQLite
	}
	return Postgres
}

// Check checks the graph st and the database db under it (the same
// database, opened through database/sql).
func Check(ctx context.Context, st store.Store, db *sql.DB, d Dialect, opts Options) (Report, error) {
	if opts.MaxProblems <= 0 {
		opts.MaxProblems = 1000
	}
	c := &checker{db: db, d: d, max: opts.MaxProblems}
	steps := []func(context.Context) error{
		c.appendOnly,
		func(ctx context.Context) error { return c.hashChain(ctx, st) },
		c.structure,
		c.acyclic,
		c.exactlyOnce,
		c.descent,
	}
	if opts.Settled {
		steps = append(steps, c.settled)
	}
	for _, f := range steps {
		if err := f(ctx); err != nil {
			return c.rep, err
		}
	}
	return c.rep, nil
}

type checker struct {
	db  *sql.DB
	d   Dialect
	max int
	rep Report
}

func (c *checker) add(inv, row, format string, args ...any) {
	if len(c.rep.Problems) < c.max {
		c.rep.Problems = append(c.rep.Problems, Problem{Invariant: inv, Row: row, Detail: fmt.Sprintf(format, args...)})
	}
}

// each runs q and calls fn for every row; fn scans it.
func (c *checker) each(ctx context.Context, what, q string, fn func(*sql.Rows) error, args ...any) error {
	rows, err := c.db.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("check %s: %w", what, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return fmt.Errorf("check %s: %w", what, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("check %s: %w", what, err)
	}
	return nil
}

var graphTables = []string{"versions", "chunks", "lineage"}

// appendOnly checks that each graph table has enabled triggers refusing
// UPDATE and DELETE (and, on Postgres, TRUNCATE).
func (c *checker) appendOnly(ctx context.Context) error {
	type guard struct{ update, del, truncate bool }
	found := map[string]*guard{}
	for _, t := range graphTables {
		found[t] = &guard{}
	}
	switch c.d {
	case Postgres:
		// tgtype bits: 8 DELETE, 16 UPDATE, 32 TRUNCATE. tgenabled: 'O'
		// fires in ordinary sessions, 'A' always; 'D' (disabled) and 'R'
		// (replica sessions only) leave ordinary writers unguarded.
		err := c.each(ctx, "triggers", `SELECT c.relname, t.tgname, t.tgtype, t.tgenabled, p.proname
			FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_proc p ON p.oid = t.tgfoid
			WHERE NOT t.tgisinternal AND c.relname IN ('versions', 'chunks', 'lineage')
			AND c.relnamespace = current_schema()::regnamespace`, func(rows *sql.Rows) error {
			var table, name, enabled, fn string
			var typ int
			if err := rows.Scan(&table, &name, &typ, &enabled, &fn); err != nil {
				return err
			}
			if fn != "rath_refuse_change" {
				return nil
			}
			if enabled != "O" && enabled != "A" {
				c.add(AppendOnly, "trigger "+table+"."+name, "is disabled (tgenabled %q)", enabled)
				return nil
			}
			g := found[table]
			g.del = g.del || typ&8 != 0
			g.update = g.update || typ&16 != 0
			g.truncate = g.truncate || typ&32 != 0
			return nil
		})
		if err != nil {
			return err
		}
	case SQLite:
		err := c.each(ctx, "triggers", `SELECT tbl_name, name, sql FROM sqlite_master WHERE type = 'trigger'`, func(rows *sql.Rows) error {
			var table, name string
			var text sql.NullString
			if err := rows.Scan(&table, &name, &text); err != nil {
				return err
			}
			g, ok := found[table]
			if !ok {
				return nil
			}
			s := strings.ToUpper(text.String)
			if !strings.Contains(s, "RAISE(ABORT") {
				return nil
			}
			g.update = g.update || strings.Contains(s, "BEFORE UPDATE")
			g.del = g.del || strings.Contains(s, "BEFORE DELETE")
			g.truncate = true // SQLite has no TRUNCATE
			return nil
		})
		if err != nil {
			return err
		}
	}
	for _, t := range graphTables {
		g := found[t]
		for _, m := range []struct {
			op string
			ok bool
		}{{"UPDATE", g.update}, {"DELETE", g.del}, {"TRUNCATE", g.truncate}} {
			if !m.ok {
				c.add(AppendOnly, "table "+t, "no enabled trigger refuses %s", m.op)
			}
		}
	}
	return nil
}

func (c *checker) hashChain(ctx context.Context, st store.Store) error {
	rep, err := st.Verify(ctx)
	c.rep.Versions, c.rep.Chunks, c.rep.Edges = rep.Versions, rep.Chunks, rep.Edges
	for _, p := range rep.Problems {
		row, detail, ok := strings.Cut(p, ": ")
		if !ok {
			row, detail = "graph", p
		}
		c.add(HashChain, row, "%s", detail)
	}
	if err != nil && len(rep.Problems) == 0 {
		return fmt.Errorf("check hash chain: %w", err)
	}
	return nil
}

// structure checks chunk and lineage counts against the version rows, and
// rows that name missing versions.
func (c *checker) structure(ctx context.Context) error {
	err := c.each(ctx, "chunk counts", `SELECT CAST(v.id AS TEXT), v.own_count, COUNT(c.version_id) FROM versions v
		LEFT JOIN chunks c ON c.version_id = v.id GROUP BY v.id, v.own_count HAVING COUNT(c.version_id) <> v.own_count`,
		func(rows *sql.Rows) error {
			var id string
			var own, n int
			if err := rows.Scan(&id, &own, &n); err != nil {
				return err
			}
			c.add(Structure, "version "+id, "stores %d chunks, own_count says %d", n, own)
			return nil
		})
	if err != nil {
		return err
	}
	err = c.each(ctx, "lineage counts", `SELECT CAST(v.id AS TEXT), v.parent_count, COUNT(l.child_id) FROM versions v
		LEFT JOIN lineage l ON l.child_id = v.id GROUP BY v.id, v.parent_count HAVING COUNT(l.child_id) <> v.parent_count`,
		func(rows *sql.Rows) error {
			var id string
			var pc, n int
			if err := rows.Scan(&id, &pc, &n); err != nil {
				return err
			}
			c.add(Structure, "version "+id, "has %d lineage rows, parent_count says %d", n, pc)
			return nil
		})
	if err != nil {
		return err
	}
	err = c.each(ctx, "orphan chunks", `SELECT CAST(c.version_id AS TEXT), c.ord FROM chunks c
		LEFT JOIN versions v ON v.id = c.version_id WHERE v.id IS NULL`, func(rows *sql.Rows) error {
		var id string
		var ord int
		if err := rows.Scan(&id, &ord); err != nil {
			return err
		}
		c.add(Structure, fmt.Sprintf("chunk (%s, %d)", id, ord), "orphan: its version does not exist")
		return nil
	})
	if err != nil {
		return err
	}
	return c.each(ctx, "orphan lineage", `SELECT CAST(l.child_id AS TEXT), CAST(l.parent_id AS TEXT) FROM lineage l
		LEFT JOIN versions c ON c.id = l.child_id LEFT JOIN versions p ON p.id = l.parent_id
		WHERE c.id IS NULL OR p.id IS NULL`, func(rows *sql.Rows) error {
		var child, parent string
		if err := rows.Scan(&child, &parent); err != nil {
			return err
		}
		c.add(Structure, fmt.Sprintf("lineage %s → %s", child, parent), "orphan: names a version that does not exist")
		return nil
	})
}

// acyclic looks for a cycle through lineage and base edges with an
// iterative depth-first search.
func (c *checker) acyclic(ctx context.Context) error {
	edges := map[string][]string{}
	add := func(rows *sql.Rows) error {
		var from, to string
		if err := rows.Scan(&from, &to); err != nil {
			return err
		}
		edges[from] = append(edges[from], to)
		return nil
	}
	if err := c.each(ctx, "lineage edges", `SELECT CAST(child_id AS TEXT), CAST(parent_id AS TEXT) FROM lineage`, add); err != nil {
		return err
	}
	if err := c.each(ctx, "base edges", `SELECT CAST(id AS TEXT), CAST(base_id AS TEXT) FROM versions WHERE base_id IS NOT NULL`, add); err != nil {
		return err
	}
	const (
		white = iota
		grey
		black
	)
	color := make(map[string]int, len(edges))
	type frame struct {
		id string
		i  int
	}
	for start := range edges {
		if color[start] != white {
			continue
		}
		stack := []frame{{id: start}}
		color[start] = grey
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.i == len(edges[top.id]) {
				color[top.id] = black
				stack = stack[:len(stack)-1]
				continue
			}
			next := edges[top.id][top.i]
			top.i++
			switch color[next] {
			case grey:
				path := []string{next}
				for j := len(stack) - 1; j >= 0 && stack[j].id != next; j-- {
					path = append(path, stack[j].id)
				}
				path = append(path, next)
				c.add(Acyclic, "version "+next, "is its own ancestor: %s", strings.Join(path, " → "))
			case white:
				color[next] = grey
				stack = append(stack, frame{id: next})
			}
		}
	}
	return nil
}

// exactlyOnce checks steps against the versions they committed.
func (c *checker) exactlyOnce(ctx context.Context) error {
	// One version per producer step (a commit without the key would make a
	// second one).
	err := c.each(ctx, "versions per step", `SELECT step, COUNT(*) FROM versions
		WHERE step IS NOT NULL AND step <> '' AND op = 'step' GROUP BY step HAVING COUNT(*) > 1`, func(rows *sql.Rows) error {
		var step string
		var n int
		if err := rows.Scan(&step, &n); err != nil {
			return err
		}
		c.add(ExactlyOnce, "step "+step, "committed %d versions, want 1", n)
		return nil
	})
	if err != nil {
		return err
	}
	err = c.each(ctx, "versions per key", `SELECT key, COUNT(*) FROM versions WHERE key IS NOT NULL GROUP BY key HAVING COUNT(*) > 1`,
		func(rows *sql.Rows) error {
			var key string
			var n int
			if err := rows.Scan(&key, &n); err != nil {
				return err
			}
			c.add(ExactlyOnce, "key "+key, "%d versions share the key, want 1", n)
			return nil
		})
	if err != nil {
		return err
	}
	// Each step against the version keyed by its id. A step a rerun kept
	// (runs.Store.CreateRerun) committed no version of its own: its output
	// is the one the original run's step of the same key committed, keyed
	// by that step; those are checked after the scan.
	type keptStep struct{ id, output string }
	var kept []keptStep
	err = c.each(ctx, "steps", `SELECT s.id, s.status, COALESCE(CAST(s.output_id AS TEXT), ''), s.error, COALESCE(CAST(v.id AS TEXT), ''), r.status
		FROM steps s JOIN runs r ON r.id = s.run_id LEFT JOIN versions v ON v.key = s.id`, func(rows *sql.Rows) error {
		var id, status, output, reason, keyed, runStatus string
		if err := rows.Scan(&id, &status, &output, &reason, &keyed, &runStatus); err != nil {
			return err
		}
		c.rep.Steps++
		row := "step " + id
		switch runs.StepStatus(status) {
		case runs.StepCommitted:
			switch {
			case output == "":
				c.add(ExactlyOnce, row, "committed without an output version")
			case keyed == "":
				kept = append(kept, keptStep{id: id, output: output})
			case !sameID(keyed, output):
				c.add(ExactlyOnce, row, "committed output %s, but the version keyed by the step is %s", output, keyed)
			}
		case runs.StepFailed:
			if strings.TrimSpace(reason) == "" {
				c.add(ExactlyOnce, row, "failed without a recorded reason")
			}
			if keyed != "" {
				c.add(ExactlyOnce, row, "failed, but version %s is keyed by it (its commit was not recorded)", keyed)
			}
		case runs.StepCanceled:
			// A step is canceled with its run (canceled, failed or timed
			// out); in a run that succeeded it is unexplained.
			if runs.RunStatus(runStatus) == runs.RunSucceeded && strings.TrimSpace(reason) == "" {
				c.add(ExactlyOnce, row, "canceled without a reason in a run that succeeded")
			}
		default:
			c.rep.Open++
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range kept {
		var from string
		err := c.db.QueryRowContext(ctx, `SELECT COALESCE(MIN(o.id), '') FROM steps o JOIN versions v ON v.key = o.id
			WHERE o.output_id = $1 AND o.id <> $2 AND o.status = 'committed' AND CAST(v.id AS TEXT) = CAST(o.output_id AS TEXT)`,
			k.output, k.id).Scan(&from)
		if err != nil {
			return fmt.Errorf("check kept steps: %w", err)
		}
		_, key, _ := strings.Cut(k.id, "/")
		_, fromKey, _ := strings.Cut(from, "/")
		if from == "" || key != fromKey {
			c.add(ExactlyOnce, "step "+k.id, "committed output %s, but no version is keyed by the step", k.output)
		}
	}
	// Each run against its steps.
	return c.each(ctx, "runs", `SELECT r.id, r.status, COALESCE(CAST(r.output_id AS TEXT), ''), r.error,
		COALESCE((SELECT CAST(s.output_id AS TEXT) FROM steps s WHERE s.run_id = r.id ORDER BY s.ordinal DESC LIMIT 1), ''),
		(SELECT COUNT(*) FROM steps s WHERE s.run_id = r.id AND s.status <> 'committed')
		FROM runs r`, func(rows *sql.Rows) error {
		var id, status, output, reason, last string
		var notCommitted int
		if err := rows.Scan(&id, &status, &output, &reason, &last, &notCommitted); err != nil {
			return err
		}
		c.rep.Runs++
		row := "run " + id
		switch runs.RunStatus(status) {
		case runs.RunSucceeded:
			if notCommitted > 0 {
				c.add(ExactlyOnce, row, "succeeded with %d step(s) not committed", notCommitted)
			}
			if output == "" || !sameID(output, last) {
				c.add(ExactlyOnce, row, "succeeded with output %q, its last step's is %q", output, last)
			}
		case runs.RunFailed:
			if strings.TrimSpace(reason) == "" {
				c.add(ExactlyOnce, row, "failed without a recorded reason")
			}
		}
		return nil
	})
}

// descent checks that each committed step's output descends from its
// input: a version a step adopted but did not make (a squatted key, a row
// rewritten by hand) has other ancestors. The walk up from the output
// stops at the input, so it is as long as the step's own versions
// (UNION drops repeats, so merges do not multiply it).
func (c *checker) descent(ctx context.Context) error {
	return c.each(ctx, "step descent", `WITH RECURSIVE up (step_id, input_id, vid) AS (
		SELECT s.id, s.input_id, s.output_id FROM steps s
		WHERE s.status = 'committed' AND s.output_id IS NOT NULL
		UNION
		SELECT up.step_id, up.input_id, l.parent_id
		FROM up JOIN lineage l ON l.child_id = up.vid
		WHERE up.vid <> up.input_id
	)
	SELECT s.id, CAST(s.output_id AS TEXT), CAST(s.input_id AS TEXT) FROM steps s
	WHERE s.status = 'committed' AND s.output_id IS NOT NULL
	  AND NOT EXISTS (SELECT 1 FROM up WHERE up.step_id = s.id AND up.vid = up.input_id)`, func(rows *sql.Rows) error {
		var id, output, input string
		if err := rows.Scan(&id, &output, &input); err != nil {
			return err
		}
		c.add(Descent, "step "+id, "committed output %s does not descend from its input %s", output, input)
		return nil
	})
}

// settled requires every run and step to have ended.
func (c *checker) settled(ctx context.Context) error {
	return c.each(ctx, "open runs", `SELECT 'run', id, status FROM runs WHERE state = 'open'
		UNION ALL SELECT 'step', id, status FROM steps WHERE status IN ('pending', 'running', 'waiting')`, func(rows *sql.Rows) error {
		var kind, id, status string
		if err := rows.Scan(&kind, &id, &status); err != nil {
			return err
		}
		c.add(Settled, kind+" "+id, "is still %s", status)
		return nil
	})
}

// sameID compares ids as stored: Postgres returns uuids in one case, SQLite
// text as written.
func sameID(a, b string) bool { return strings.EqualFold(a, b) }

// ErrViolated is returned by [Report.Err] when invariants are violated.
var ErrViolated = errors.New("rath: invariants violated")

// Err returns nil for a clean report, else an error wrapping [ErrViolated]
// naming the first problem.
func (r Report) Err() error {
	if r.OK() {
		return nil
	}
	return fmt.Errorf("%w: %d problem(s), first: %s", ErrViolated, len(r.Problems), r.Problems[0])
}
