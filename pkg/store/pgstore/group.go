package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/rath-run/rath/pkg/session"
)

// Group commit. A commit that arrives while a group is in flight waits for
// it to finish and then goes, with every other commit that queued
// meanwhile, as one pipelined batch that Postgres runs as one implicit
// transaction: one round trip, one WAL flush and one transaction's
// overhead for the whole group. A commit that arrives when none is in
// flight goes at once, alone, so grouping adds no latency when the store
// is idle; under load the groups grow by themselves, up to maxGroup
// commits each. A group's versions, chunks and edges go as one multi-row
// statement each, and so do its members' statements that have a
// multi-row form ([Stmt.Rows]): Postgres sets a statement up once a group.
//
// Commits that have queued for [StallAfter] behind the group in flight go
// as a further group, up to [Options.GroupCommit] groups in flight: one
// group held up (a row lock, a connection gone silent) does not hold
// every commit of the process behind it. Until then they wait, rather
// than go at once beside it: a second group sent the moment a commit
// arrives is mostly a group of one, and a commit alone costs Postgres
// about twice as much as one in a group (issue 25, nineteenth round).
//
// A group commits all or nothing. When it fails on a statement (a replayed
// version's unique key, a lane taken by a concurrent commit, a caller's
// statement refused), nothing of it was written, and each of its commits is
// retried alone, which resolves its own case as an ungrouped commit would.
// When it fails on the connection, whether it committed is unknown, as for
// any commit whose connection breaks: each commit reports the error.

// maxGroup bounds the commits one group takes; the rest queue for the
// next. It keeps a group's batch, its statements' arrays and the work of
// a failed group's members, each retried alone, to a size that a burst of
// thousands of concurrent commits cannot grow without end.
const maxGroup = 256

// groupTimeout bounds one group's round trip: a group runs on behalf of
// several callers, so no single caller's context may cancel it.
const groupTimeout = time.Minute

// StallAfter is how long commits queue behind the group in flight before
// they go as a further group of their own (up to [Options.GroupCommit] in
// flight); package runs holds its grouped step starts to the same. A
// healthy group's statements take well under a millisecond at 16 steps in
// flight (by pg_stat_statements, issue 25's nineteenth round); a group
// held by a row lock or a silent connection takes longer, and the commits
// behind it go on without it.
const StallAfter = 2 * time.Millisecond

// commitReq is one commit waiting in the group queue.
type commitReq struct {
	ctx   context.Context // the caller's
	v     *session.Version
	claim bool
	after []Stmt
	// scanErr holds the first error of the request's own Scan callbacks:
	// they run after the server has committed, so they fail the request,
	// not the group.
	scanErr error
	err     error
	done    chan struct{}
}

// grouper batches concurrent commits (see above). Make one with
// newGrouper.
type grouper struct {
	q   querier
	max int
	// stall is StallAfter, unless a test sets another.
	stall time.Duration
	// tenant is stated for root versions ([Options.Tenant]).
	tenant string

	mu       sync.Mutex
	queue    []*commitReq
	inflight int
	// spill, while set, sends the queue as a further group once the group
	// in flight has held it for stall (see commit).
	spill *time.Timer
}

func newGrouper(q querier, maxInFlight int, tenant string) *grouper {
	return &grouper{q: q, max: maxInFlight, stall: StallAfter, tenant: tenant}
}

// commit writes one version (and its statements) through the group queue.
// It returns when its group has committed or failed; when ctx ends first
// it returns ctx's error, and the commit may still happen.
func (g *grouper) commit(ctx context.Context, v *session.Version, claim bool, after []Stmt) error {
	req := &commitReq{ctx: ctx, v: v, claim: claim, after: after, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, req)
	lead := g.inflight == 0
	if lead {
		g.inflight++
	} else if g.inflight < g.max && g.spill == nil {
		g.spill = time.AfterFunc(g.stall, g.spillOver)
	}
	g.mu.Unlock()
	if lead {
		// This caller sends the group holding its own commit; the groups
		// that queue meanwhile go on from a goroutine of their own.
		g.lead()
	}
	select {
	case <-req.done:
		return req.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lead sends the queued requests, up to maxGroup, as one group; then, if
// more are queued, it has a new goroutine send those, else it gives its
// in-flight slot back.
func (g *grouper) lead() {
	g.mu.Lock()
	n := min(len(g.queue), maxGroup)
	batch := g.queue[:n:n]
	g.queue = g.queue[n:]
	if len(g.queue) == 0 {
		g.queue = nil
		if g.spill != nil {
			g.spill.Stop()
			g.spill = nil
		}
	}
	g.mu.Unlock()

	g.run(batch)

	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.queue) > 0 {
		go g.lead()
		return
	}
	g.inflight--
}

// spillOver sends the queue as a further group, when there is room for
// one: the group in flight has kept it waiting for stall.
func (g *grouper) spillOver() {
	g.mu.Lock()
	g.spill = nil
	lead := len(g.queue) > 0 && g.inflight < g.max
	if lead {
		g.inflight++
	}
	g.mu.Unlock()
	if lead {
		g.lead()
	}
}

// run sends batch as one group and settles each request.
func (g *grouper) run(batch []*commitReq) {
	if len(batch) == 0 {
		return
	}
	ctx, cancel := groupContext(batch)
	defer cancel()
	err := g.send(ctx, batch)
	var pgErr *pgconn.PgError
	if len(batch) > 1 && errors.As(err, &pgErr) {
		// Refused as a whole, nothing written: each alone decides its case.
		var wg sync.WaitGroup
		for _, r := range batch {
			wg.Go(func() {
				rctx, rcancel := groupContext([]*commitReq{r})
				defer rcancel()
				r.scanErr = nil
				r.err = g.send(rctx, []*commitReq{r})
				if r.err == nil {
					r.err = r.scanErr
				}
				close(r.done)
			})
		}
		wg.Wait()
		return
	}
	for _, r := range batch {
		r.err = err
		if err == nil {
			r.err = r.scanErr
		}
		close(r.done)
	}
}

// groupContext is the context a group runs under: it ends after
// groupTimeout, or once every member's own context has ended (a single
// commit is canceled with its caller, as an ungrouped one would be, and a
// caller giving up on a dead connection is not kept waiting for it).
func groupContext(batch []*commitReq) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	var waiting atomic.Int64
	waiting.Store(int64(len(batch)))
	stops := make([]func() bool, 0, len(batch))
	for _, r := range batch {
		stops = append(stops, context.AfterFunc(r.ctx, func() {
			if waiting.Add(-1) == 0 {
				cancel()
			}
		}))
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// send queues every request's statements into one batch and runs it. A
// group of several writes its versions, chunks and edges as one
// multi-row statement each (queueRows), then each request's own
// statements in order.
func (g *grouper) send(ctx context.Context, batch []*commitReq) error {
	b := &pgx.Batch{}
	if len(batch) == 1 {
		r := batch[0]
		args, err := argsOf(r.v)
		if err != nil {
			return err
		}
		b.Queue(insertVersionSQL, append(args, r.claim, firstParent(r.v), g.tenant)...)
		if len(r.v.Chunks) > 0 {
			ords, kinds, payloads, hashes := chunkColumns(r.v)
			b.Queue(insertChunksSQL, r.v.ID, ords, kinds, payloads, hashes)
		}
		if len(r.v.Parents) > 0 {
			b.Queue(insertEdgesSQL, r.v.ID, r.v.Parents, string(r.v.Op))
		}
	} else if err := g.queueRows(b, batch); err != nil {
		return err
	}
	queueAfter(b, batch)
	return g.q.SendBatch(ctx, b).Close()
}

// queueAfter queues the requests' own statements place by place: every
// request's first statement, then every second one, and so on, each
// request's in its own order (the requests are independent commits, so
// their order among each other does not matter). At each place, the
// requests whose statement there has the same multi-row form
// ([Stmt.Rows]) run it as one statement.
func queueAfter(b *pgx.Batch, batch []*commitReq) {
	for j := 0; ; j++ {
		var at []*commitReq
		forms := map[string][]*commitReq{}
		var order []string
		for _, r := range batch {
			if j >= len(r.after) {
				continue
			}
			at = append(at, r)
			if st := r.after[j]; st.Rows != "" && st.Scan == nil {
				if forms[st.Rows] == nil {
					order = append(order, st.Rows)
				}
				forms[st.Rows] = append(forms[st.Rows], r)
			}
		}
		if len(at) == 0 {
			return
		}
		merged := map[*commitReq]bool{}
		for _, form := range order {
			if rs := forms[form]; len(rs) > 1 && queueRowsOf(b, form, rs, j) {
				for _, r := range rs {
					merged[r] = true
				}
			}
		}
		for _, r := range at {
			if !merged[r] {
				queueStmt(b, r, r.after[j])
			}
		}
	}
}

// queueRowsOf queues the statements at place j of rs, which share the
// multi-row form form, as one statement of it; false when their
// arguments do not line up (then each goes alone).
func queueRowsOf(b *pgx.Batch, form string, rs []*commitReq, j int) bool {
	n := len(rs[0].after[j].Args)
	for _, r := range rs {
		if len(r.after[j].Args) != n {
			return false
		}
	}
	cols := make([]any, n)
	for i := range cols {
		col := make([]any, len(rs))
		for k, r := range rs {
			col[k] = r.after[j].Args[i]
		}
		cols[i] = col
	}
	q := b.Queue(form, cols...)
	if slices.ContainsFunc(rs, func(r *commitReq) bool { return r.after[j].Row != nil && r.after[j].Scan == nil }) {
		q.Query(func(rows pgx.Rows) error { return handOut(rows, rs, j) })
	}
	return true
}

// handOut reads the rows of the multi-row statement at place j of rs and
// gives each to the Row of the commit its last column names (see
// [Stmt.Row]). As for a statement of one commit (queueStmt), the
// server's refusal fails the group, and a client-side error fails the
// commits it concerns.
func handOut(rows pgx.Rows, rs []*commitReq, j int) error {
	defer rows.Close()
	var types *pgtype.Map
	if c := rows.Conn(); c != nil {
		types = c.TypeMap()
	} else {
		types = pgtype.NewMap()
	}
	for rows.Next() {
		k, err := placeOf(types, rows)
		if err == nil && (k < 1 || k > len(rs)) {
			err = fmt.Errorf("a multi-row statement's row is for commit %d of %d", k, len(rs))
		}
		if err != nil {
			for _, r := range rs {
				if r.scanErr == nil {
					r.scanErr = err
				}
			}
			continue
		}
		r := rs[k-1]
		st := r.after[j]
		if st.Row == nil || st.Scan != nil {
			continue
		}
		if err := st.Row(rows); err != nil && r.scanErr == nil {
			r.scanErr = err
		}
	}
	return rows.Err()
}

// placeOf reads a multi-row statement's row's last column, with types:
// the place, from 1, of the commit the row is for.
func placeOf(types *pgtype.Map, rows pgx.Rows) (int, error) {
	fds, raw := rows.FieldDescriptions(), rows.RawValues()
	if len(fds) == 0 || len(raw) != len(fds) {
		return 0, errors.New("a multi-row statement's row has no place column")
	}
	var k int64
	last := len(fds) - 1
	if err := types.Scan(fds[last].DataTypeOID, fds[last].Format, raw[last], &k); err != nil {
		return 0, fmt.Errorf("a multi-row statement's place column: %w", err)
	}
	return int(k), nil
}

// queueStmt queues one request's statement with its Scan.
func queueStmt(b *pgx.Batch, r *commitReq, st Stmt) {
	b.Queue(st.SQL, st.Args...).Query(func(rows pgx.Rows) error {
		if err := scanStmt(st, rows); err != nil && r.scanErr == nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) {
				return err // the server refused the statement: the group fails
			}
			r.scanErr = err
		}
		return nil
	})
}

// queueRows queues the rows of a group's versions as three statements,
// whatever the group's size: Postgres pays its cost of running a
// statement (setting up the plan, the table's CHECK constraints and
// triggers) once a group, not once a version (issue 25).
//
// They write what each version's own insertVersionSQL would: every
// version's links were committed before it was queued (Put verifies them
// against the stored rows first), so no version of a group is another's
// base or parent, and one statement sees all it needs. Of two versions
// extending the same base, only the first may join the base's lane: one
// after the other in one transaction, the second would have found the
// position taken and started its own, as it does here.
func (g *grouper) queueRows(b *pgx.Batch, batch []*commitReq) error {
	vs := make([]*session.Version, len(batch))
	claims := make([]bool, len(batch))
	parents := make([]pgtype.UUID, len(batch))
	claimed := make(map[session.ID]bool, len(batch))
	for i, r := range batch {
		vs[i] = r.v
		if r.claim && r.v.Base != nil && !claimed[*r.v.Base] {
			claims[i], claimed[*r.v.Base] = true, true
		}
		if len(r.v.Parents) > 0 {
			parents[i] = pgtype.UUID{Bytes: r.v.Parents[0], Valid: true}
		}
	}
	c, err := columnsOf(vs)
	if err != nil {
		return err
	}
	b.Queue(groupVersionsSQL, c.versionArgs(claims, parents, g.tenant)...)
	if len(c.chunkVersion) > 0 {
		b.Queue(groupChunksSQL, c.chunkVersion, c.chunkOrd, c.chunkKind, c.chunkPayload, c.chunkHash)
	}
	c.queueEdges(b)
	return nil
}

// groupVersionsSQL is insertVersionSQL for many versions, one array
// parameter a column ($1–$21 as bulkVersionsSQL's), $22 whether each may
// join its base's lane, $23 each one's first parent (whose tenant it
// takes), $24 the store's tenant for roots. The base's lane and the first
// parent's tenant are found by key for each row (a lateral lookup, a
// scalar subquery): TestGroupPlanUsesKeys holds the cached plan to that.
//
// The arrays reach unnest through a subquery that OFFSET 0 keeps apart,
// here and in groupChunksSQL: a plan made for the parameters' values
// cannot see how many rows the arrays hold, so it costs what the cached
// generic plan costs, and after its first five executions a connection
// runs the statement on that plan instead of planning it again each time.
// Given the arrays themselves, the planner costs a small group far below
// the generic plan and planned every execution anew: 0.4 ms of planning
// for the versions statement, 44% of its execution time
// (TestGroupStatementsUseTheCachedPlan).
const groupVersionsSQL = `INSERT INTO versions (id, base_id, op, len, own_count, parent_count, placement,
	prompt_tokens, completion_tokens, total_tokens, run, step, agent, model, worker, trace_id, extras, key,
	created_at, created_nanos, hash, lane, pos, tenant)
SELECT t.id, t.base_id, t.op, t.len, t.own_count, t.parent_count, t.placement::jsonb,
	t.prompt_tokens, t.completion_tokens, t.total_tokens, t.run, t.step, t.agent, t.model, t.worker, t.trace_id,
	t.extras::json, t.key, t.created_at, t.created_nanos, t.hash, COALESCE(c.lane, t.id), COALESCE(c.pos, 0),
	COALESCE((SELECT p.tenant FROM versions p WHERE p.id = t.first_parent), $24::text)
FROM (SELECT $1::uuid[] a1, $2::uuid[] a2, $3::text[] a3, $4::integer[] a4, $5::integer[] a5, $6::integer[] a6,
	$7::text[] a7, $8::bigint[] a8, $9::bigint[] a9, $10::bigint[] a10, $11::text[] a11, $12::text[] a12,
	$13::text[] a13, $14::text[] a14, $15::text[] a15, $16::text[] a16, $17::text[] a17, $18::text[] a18,
	$19::timestamptz[] a19, $20::smallint[] a20, $21::text[] a21, $22::boolean[] a22, $23::uuid[] a23 OFFSET 0) arr,
	unnest(arr.a1, arr.a2, arr.a3, arr.a4, arr.a5, arr.a6, arr.a7, arr.a8, arr.a9, arr.a10, arr.a11, arr.a12, arr.a13, arr.a14, arr.a15,
	arr.a16, arr.a17, arr.a18, arr.a19, arr.a20, arr.a21, arr.a22, arr.a23)
	WITH ORDINALITY AS t(id, base_id, op, len, own_count, parent_count, placement,
	prompt_tokens, completion_tokens, total_tokens, run, step, agent, model, worker, trace_id, extras, key,
	created_at, created_nanos, hash, claim, first_parent, n)
LEFT JOIN LATERAL (
	SELECT b.lane, b.pos + 1 AS pos FROM versions b
	WHERE t.claim AND b.id = t.base_id
	  AND NOT EXISTS (SELECT 1 FROM versions o WHERE o.lane = b.lane AND o.pos = b.pos + 1)
) c ON true
ORDER BY t.n`

// groupChunksSQL is insertChunksSQL for a group's versions: each chunk in
// its version's lane, read from the version row the group wrote just
// before.
const groupChunksSQL = `INSERT INTO chunks (version_id, lane, ord, kind, payload, hash)
SELECT t.version_id, (SELECT v.lane FROM versions v WHERE v.id = t.version_id), t.ord, t.kind, t.payload, t.hash
FROM (SELECT $1::uuid[] a1, $2::integer[] a2, $3::text[] a3, $4::text[] a4, $5::text[] a5 OFFSET 0) arr,
	unnest(arr.a1, arr.a2, arr.a3, arr.a4, arr.a5) AS t(version_id, ord, kind, payload, hash)`
