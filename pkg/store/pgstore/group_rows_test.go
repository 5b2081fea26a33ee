package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/pgstore"
	"github.com/rath-run/rath/pkg/store/pgstore/pgstoretest"
	"github.com/rath-run/rath/pkg/store/storetest"
)

// captured is a graph that records the version an operation would commit
// instead of committing it.
type captured struct {
	session.Graph
	v *session.Version
}

func (c *captured) Put(_ context.Context, v *session.Version) (*session.Version, error) {
	c.v = v
	return v, nil
}

// TestGroupWritesWhatAloneWould: a group of several commits writes its
// versions, chunks and edges with one statement each, and every version
// ends as it would committed alone: of the versions extending one base,
// one joins its lane and the others start their own; a version whose
// base's next position is taken starts its own; a root takes the store's
// tenant; a merge gets both edges; each chunk is in its version's lane.
// The members' own statements that have a multi-row form run as one, and
// each member's statements still run in its order.
func TestGroupWritesWhatAloneWould(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t, pgstore.Options{GroupCommit: 1})
	pool := st.Pool()
	mustSession := func(s session.Session, err error) session.Session {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	root := mustSession(session.FromUserMessage(ctx, st, "root"))
	taken := mustSession(root.Append(ctx, session.Assistant("takes root's next position")))
	x := mustSession(session.FromUserMessage(ctx, st, "x"))
	held := mustSession(session.FromUserMessage(ctx, st, "held"))

	if _, err := pool.Exec(ctx, `CREATE TABLE probe (version uuid PRIMARY KEY REFERENCES versions (id), n int NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	release := holdGroup(t, st, held)

	newRoot := &captured{Graph: st}
	mustSession(session.FromUserMessage(ctx, newRoot, "a new root"))
	merge := &captured{Graph: st}
	mustSession(session.Wrap(merge, x.Version()).Merge(ctx, session.Wrap(merge, root.Version())))
	members := []*session.Version{
		storetest.Prepare(t, x, "m1", session.Assistant("one")),
		storetest.Prepare(t, x, "m2", session.Assistant("two")),
		storetest.Prepare(t, root, "m3", session.Assistant("three")),
		newRoot.v,
		merge.v,
	}
	// Each member's own statement has a multi-row form: they run as one.
	// One member has a second statement, reading what its first wrote.
	seen := -1
	errs := make([]error, len(members))
	ran := make([]bool, len(members))
	for i, v := range members {
		after := []pgstore.Stmt{{SQL: `INSERT INTO probe (version, n) VALUES ($1, $2)`, Args: []any{v.ID, i},
			Rows: `INSERT INTO probe (version, n) SELECT * FROM unnest($1::uuid[], $2::int[])`}}
		if i == 3 { // at the same place, a statement of another kind: the others still go as one
			after = []pgstore.Stmt{{SQL: `SELECT 1 FROM versions WHERE id = $1`, Args: []any{v.ID}, Scan: func(rows pgx.Rows) error {
				if !rows.Next() {
					return errors.New("the member's own version is not there")
				}
				return nil
			}}}
		}
		if i == 2 {
			after = append(after, pgstore.Stmt{SQL: `SELECT n FROM probe WHERE version = $1`, Args: []any{v.ID}, Scan: func(rows pgx.Rows) error {
				for rows.Next() {
					if err := rows.Scan(&seen); err != nil {
						return err
					}
				}
				return rows.Err()
			}})
		}
		wg.Go(func() { _, ran[i], errs[i] = st.PutWith(ctx, v, after...) })
	}
	release(len(members))
	wg.Wait()
	for i := range members {
		if errs[i] != nil || !ran[i] {
			t.Fatalf("member %d: ran %v, %v; want committed", i, ran[i], errs[i])
		}
	}

	type row struct {
		lane        uuid.UUID
		pos         int
		tenant      string
		xmin, cmin  string
		parentCount int
	}
	rows := map[uuid.UUID]row{}
	ids := make([]uuid.UUID, len(members))
	for i, v := range members {
		ids[i] = v.ID
	}
	q, err := pool.Query(ctx, `SELECT id, lane, pos, tenant, xmin::text, cmin::text, parent_count FROM versions WHERE id = ANY($1)`, ids)
	if err != nil {
		t.Fatal(err)
	}
	for q.Next() {
		var id uuid.UUID
		var r row
		if err := q.Scan(&id, &r.lane, &r.pos, &r.tenant, &r.xmin, &r.cmin, &r.parentCount); err != nil {
			t.Fatal(err)
		}
		rows[id] = r
	}
	if q.Err() != nil || len(rows) != len(members) {
		t.Fatalf("read %d member rows, %v", len(rows), q.Err())
	}
	first := rows[members[0].ID]
	for i, v := range members {
		r := rows[v.ID]
		if r.xmin != first.xmin || r.cmin != first.cmin {
			t.Errorf("member %d written by transaction %s command %s, member 0 by %s/%s: want one statement", i, r.xmin, r.cmin, first.xmin, first.cmin)
		}
		if r.tenant != pgstore.DefaultTenant {
			t.Errorf("member %d: tenant %q, want %q", i, r.tenant, pgstore.DefaultTenant)
		}
	}

	if seen != 2 {
		t.Errorf("member 2's second statement read n = %d, want 2 (its first statement's row)", seen)
	}
	var probes, probeStatements, wrongN int
	if err := pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT (xmin::text, cmin::text)), count(*) FILTER (WHERE version <> ($1::uuid[])[n + 1])
		FROM probe`, ids).Scan(&probes, &probeStatements, &wrongN); err != nil {
		t.Fatal(err)
	}
	if probes != len(members)-1 || probeStatements != 1 || wrongN != 0 {
		t.Errorf("probe rows: %d by %d statements, %d with another member's n; want %d by 1, 0", probes, probeStatements, wrongN, len(members)-1)
	}

	lanePos := func(id session.ID) (uuid.UUID, int) {
		var lane uuid.UUID
		var pos int
		if err := pool.QueryRow(ctx, `SELECT lane, pos FROM versions WHERE id = $1`, id).Scan(&lane, &pos); err != nil {
			t.Fatal(err)
		}
		return lane, pos
	}
	xLane, xPos := lanePos(x.Version().ID)
	joined := 0
	for i, v := range []*session.Version{members[0], members[1], members[4]} { // all extend x
		r := rows[v.ID]
		switch {
		case r.lane == xLane && r.pos == xPos+1:
			joined++
		case r.lane != v.ID || r.pos != 0:
			t.Errorf("extension %d of x: lane %s pos %d; want x's next position or its own lane", i, r.lane, r.pos)
		}
	}
	if joined != 1 {
		t.Errorf("%d of the three extensions of x joined its lane, want 1", joined)
	}
	for i, v := range members[2:4] { // root's next position is taken; a root
		if r := rows[v.ID]; r.lane != v.ID || r.pos != 0 {
			t.Errorf("member %d: lane %s pos %d, want its own lane", i+2, r.lane, r.pos)
		}
	}
	if tl, tp := lanePos(taken.Version().ID); tp != 1 {
		t.Fatalf("setup: root's extension at lane %s pos %d, want position 1", tl, tp)
	}

	var wrongLane, chunks int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE c.lane <> v.lane), count(*)
		FROM chunks c JOIN versions v ON v.id = c.version_id WHERE v.id = ANY($1)`, ids).Scan(&wrongLane, &chunks); err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, v := range members {
		want += len(v.Chunks)
	}
	if wrongLane != 0 || chunks != want {
		t.Errorf("chunks: %d stored (%d outside their version's lane), want %d", chunks, wrongLane, want)
	}
	var edges []byte
	if err := pool.QueryRow(ctx, `SELECT json_agg(json_build_array(parent_id, ordinal, op) ORDER BY ordinal) FROM lineage WHERE child_id = $1`, merge.v.ID).Scan(&edges); err != nil {
		t.Fatal(err)
	}
	wantEdges, _ := json.Marshal([][]any{{x.Version().ID, 0, "merge"}, {root.Version().ID, 1, "merge"}})
	if strings.ReplaceAll(string(edges), " ", "") != string(wantEdges) {
		t.Errorf("merge's edges = %s, want %s", edges, wantEdges)
	}
	for i, v := range members {
		got, err := st.GetUncached(ctx, v.ID)
		if err != nil || got.Hash != v.Hash {
			t.Errorf("member %d read back: %v, %v", i, got, err)
		}
	}
	if _, err := st.Verify(ctx); err != nil {
		t.Fatal(err)
	}
}

// holdGroup holds one group in flight on st (pgstoretest.HoldGroup), so
// that the commits made next queue behind it and go as one group.
// release(n) waits until n commits have queued and lets the held group go.
func holdGroup(t *testing.T, st *pgstore.Store, from session.Session) (release func(n int)) {
	t.Helper()
	let := pgstoretest.HoldGroup(t, st, from)
	return func(n int) {
		t.Helper()
		testenv.Eventually(t, 10*time.Second, "the members to queue", func() bool { return pgstore.GroupQueued(st) == n })
		let()
	}
}

// TestGroupHandsEachCommitItsRows: the members' statements with a
// multi-row form and a Row run as one statement, and each member's Row
// gets the rows for it, which the statement's last column names; a member
// the statement returns no row for gets none. A row naming no member
// fails every member's commit, which the server has made all the same.
func TestGroupHandsEachCommitItsRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t, pgstore.Options{GroupCommit: 1})
	pool := st.Pool()
	if _, err := pool.Exec(ctx, `CREATE TABLE probe (version uuid PRIMARY KEY REFERENCES versions (id), n int NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	x, err := session.FromUserMessage(ctx, st, "x")
	if err != nil {
		t.Fatal(err)
	}
	// The statement returns each member's n, twice for member 1 and
	// never for member 2.
	const one = `INSERT INTO probe (version, n) VALUES ($1, $2) RETURNING n, 1`
	const many = `WITH ins AS (
		INSERT INTO probe (version, n) SELECT t.v, t.n FROM unnest($1::uuid[], $2::int[]) WITH ORDINALITY AS t(v, n, k)
		RETURNING version, n
	)
	SELECT ins.n, t.k FROM ins JOIN unnest($1::uuid[]) WITH ORDINALITY AS t(v, k) ON t.v = ins.version
	CROSS JOIN generate_series(1, CASE ins.n WHEN 1 THEN 2 WHEN 2 THEN 0 ELSE 1 END)`
	group := func(place string, hold string) ([][]int, []error) {
		t.Helper()
		release := holdGroup(t, st, x)
		got := make([][]int, 4)
		errs := make([]error, 4)
		var wg sync.WaitGroup
		for i := range got {
			v := storetest.Prepare(t, x, fmt.Sprintf("%s-%d", hold, i), session.Assistant("m"))
			stmt := pgstore.Stmt{SQL: one, Rows: strings.Replace(many, "t.k FROM", place+" FROM", 1), Args: []any{v.ID, i},
				Row: func(row pgx.CollectableRow) error {
					var n, k int
					if err := row.Scan(&n, &k); err != nil {
						return err
					}
					got[i] = append(got[i], n)
					return nil
				}}
			wg.Go(func() { _, _, errs[i] = st.PutWith(ctx, v, stmt) })
		}
		release(len(got))
		wg.Wait()
		return got, errs
	}

	got, errs := group("t.k", "a")
	for i, err := range errs {
		if err != nil {
			t.Fatalf("member %d: %v", i, err)
		}
	}
	want := [][]int{{0}, {1, 1}, nil, {3}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("rows each member got: %v, want %v", got, want)
	}
	var probes, statements int
	if err := pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT (xmin::text, cmin::text)) FROM probe`).Scan(&probes, &statements); err != nil {
		t.Fatal(err)
	}
	if probes != 4 || statements != 1 {
		t.Errorf("probe rows: %d by %d statements, want 4 by 1", probes, statements)
	}

	// Rows whose place names no member (0): every member is told. Every
	// row names 0: a member's place is the order it queued in, which the
	// test does not choose, and the member whose n is 2 returns no row.
	_, errs = group("0", "b")
	for i, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "commit 0 of 4") {
			t.Errorf("member %d: %v, want an error naming commit 0 of 4", i, err)
		}
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM probe`).Scan(&probes); err != nil || probes != 8 {
		t.Errorf("probe rows after the second group: %d, %v; want 8 (it committed)", probes, err)
	}
}

// TestGroupPlanUsesKeys: a group's multi-row statements find each base,
// first parent and chunk's version by key in the plan Postgres caches for
// them (a generic plan, planned before the arrays' sizes are known), not
// by scanning versions: a scan grows with the graph.
func TestGroupPlanUsesKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := groupConn(t)
	for _, q := range []string{
		`INSERT INTO versions (id, op, len, own_count, parent_count, hash, lane, tenant, created_at)
			SELECT id, 'create', 0, 0, 0, repeat('a', 64), id, 'default', now()
			FROM (SELECT gen_random_uuid() AS id FROM generate_series(1, 5000)) g`,
		`ANALYZE versions`,
		`SET plan_cache_mode = force_generic_plan`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	stmts := groupStatements()
	// A lone commit's version insert, claiming its base's lane.
	lits := rootInsertLits()
	lits[1], lits[21], lits[22] = "gen_random_uuid()", "true", "gen_random_uuid()" // base, claim, first parent
	stmts["insert_version"] = groupStmt{pgstore.InsertVersionSQL, lits}
	for name, c := range stmts {
		if _, err := conn.Conn().Prepare(ctx, name, c.sql); err != nil {
			t.Fatalf("%s: prepare: %v", name, err)
		}
		var raw []byte
		if err := conn.QueryRow(ctx, `EXPLAIN (FORMAT JSON) EXECUTE `+name+`(`+strings.Join(c.lits, ", ")+`)`).Scan(&raw); err != nil {
			t.Fatalf("%s: explain: %v", name, err)
		}
		lookups := 0
		for _, v := range testdb.PlanNodes(t, raw) {
			if rel, _ := v["Relation Name"].(string); rel == "versions" || rel == "chunks" {
				switch v["Node Type"] {
				case "Index Scan", "Index Only Scan":
					lookups++
				case "ModifyTable":
				default:
					t.Errorf("%s: %s on %s, want lookups by key: %s", name, v["Node Type"], rel, raw)
				}
			}
		}
		if lookups == 0 {
			t.Errorf("%s: no index lookup in the plan: %s", name, raw)
		}
	}
}

// TestGroupStatementsUseTheCachedPlan runs a commit group's statements ten
// times on one connection: after Postgres' five plans for the parameters'
// values the statements run on their cached generic plan. Given the
// arrays' values the planner saw a small group as far cheaper than the
// generic plan and planned each execution again (0.4 ms for the versions
// statement).
func TestGroupStatementsUseTheCachedPlan(t *testing.T) {
	t.Parallel()
	conn := groupConn(t)
	for name, c := range groupStatements() {
		generic, custom := testdb.CachedPlans(t, conn, name, c.sql, 10, c.lits...)
		if custom > 5 || generic < 5 {
			t.Errorf("%s: %d executions planned for their values, %d on the cached plan; want 5 and 5", name, custom, generic)
		}
	}
}

// TestVersionInsertUsesTheCachedPlan runs a lone commit's version insert
// ten times on one connection, for roots (no base to claim, no parent):
// after Postgres' five plans for the parameters' values it runs on its
// cached generic plan. Written with the claim flag, the base and the
// first parent as plain parameters, a plan for a root's values saw the
// claim and the parent lookups come to nothing and cost less than the
// generic plan, so every execution was planned anew: in a cluster of
// separate processes, where most commits go alone, 2,991 plans for
// 7,840 inserts, 44% of the statement's execution time (issue 25,
// eleventh round).
func TestVersionInsertUsesTheCachedPlan(t *testing.T) {
	t.Parallel()
	conn := groupConn(t)
	generic, custom := testdb.CachedPlans(t, conn, "insert_version", pgstore.InsertVersionSQL, 10, rootInsertLits()...)
	if custom > 5 || generic < 5 {
		t.Errorf("%d executions planned for their values, %d on the cached plan; want 5 and 5", custom, generic)
	}
}

// rootInsertLits are literals for insertVersionSQL's parameters: a new
// root each time (EXECUTE evaluates its arguments for each execution): id,
// base, op, len, own and parent counts, placement, the token counts, run,
// step, agent, model, worker, trace, extras, key, the times, hash, claim,
// first parent, tenant.
func rootInsertLits() []string {
	return []string{"gen_random_uuid()", "NULL", "'create'", "0", "0", "0", "'{}'", "0", "0", "0",
		"''", "''", "''", "''", "''", "''", "'{}'", "gen_random_uuid()::text", "now()", "0",
		"repeat('a', 64)", "false", "NULL", "'default'"}
}

// groupConn is a connection of a fresh store's pool, released when t ends.
func groupConn(t *testing.T) *pgxpool.Conn {
	t.Helper()
	st := openStore(t, pgstore.Options{})
	conn, err := st.Pool().Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	return conn
}

// groupStmt is a statement with literals for its parameters.
type groupStmt struct {
	sql  string
	lits []string
}

// groupStatements are a commit group's multi-row statements by name, each
// with literals for its parameters: empty arrays (a generic plan does not
// look at them) and, for the versions statement, the store's tenant.
func groupStatements() map[string]groupStmt {
	empty := func(n int) []string {
		lits := make([]string, n)
		for i := range lits {
			lits[i] = "'{}'"
		}
		return lits
	}
	return map[string]groupStmt{
		"group_versions": {pgstore.GroupVersionsSQL, append(empty(23), "'default'")},
		"group_chunks":   {pgstore.GroupChunksSQL, empty(5)},
	}
}

// TestGroupTakesAtMostMaxGroup: commits queued past a group's bound go in
// the groups after it, each a transaction of at most MaxGroup commits,
// and every one of them commits.
func TestGroupTakesAtMostMaxGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t, pgstore.Options{GroupCommit: 1})
	x, err := session.FromUserMessage(ctx, st, "x")
	if err != nil {
		t.Fatal(err)
	}
	n := pgstore.MaxGroup + 10
	vs := rootsApart(t, n)
	release := holdGroup(t, st, x)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, v := range vs {
		wg.Go(func() { _, errs[i] = st.Put(ctx, v) })
	}
	release(n)
	wg.Wait()
	ids := make([]string, n)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
		ids[i] = vs[i].ID.String()
	}
	rows, err := st.Pool().Query(ctx, `SELECT count(*) FROM versions WHERE id = ANY($1::uuid[]) GROUP BY xmin::text ORDER BY 1 DESC`, ids)
	if err != nil {
		t.Fatal(err)
	}
	sizes, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{pgstore.MaxGroup, n - pgstore.MaxGroup}; !slices.Equal(sizes, want) {
		t.Fatalf("%d commits queued at once went in transactions of %v; want %v", n, sizes, want)
	}
}

// rootsApart makes n root versions apart from any store: each starts a
// lane of its own, so that no two members of a group race for one.
func rootsApart(t *testing.T, n int) []*session.Version {
	t.Helper()
	mem := session.NewMemoryGraph()
	vs := make([]*session.Version, n)
	for i := range vs {
		s, err := session.FromUserMessage(context.Background(), mem, fmt.Sprintf("root %d", i))
		if err != nil {
			t.Fatal(err)
		}
		vs[i] = s.Version()
	}
	return vs
}

// TestGroupWaitsForTheGroupInFlight: with room for two groups in flight
// (the default), commits that arrive while one is in flight wait for it
// and go as one group; none goes alone beside it (the nineteenth round of
// issue 25: such a second group is mostly a group of one).
func TestGroupWaitsForTheGroupInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t, pgstore.Options{})
	pgstore.SetStall(st, time.Hour)
	x, err := session.FromUserMessage(ctx, st, "x")
	if err != nil {
		t.Fatal(err)
	}
	vs := rootsApart(t, 8)
	release := holdGroup(t, st, x)
	var wg sync.WaitGroup
	errs := make([]error, len(vs))
	ids := make([]string, len(vs))
	for i, v := range vs {
		ids[i] = v.ID.String()
		wg.Go(func() { _, errs[i] = st.Put(ctx, v) })
	}
	release(len(vs))
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	var txs int
	if err := st.Pool().QueryRow(ctx, `SELECT count(DISTINCT xmin::text) FROM versions WHERE id = ANY($1::uuid[])`, ids).Scan(&txs); err != nil {
		t.Fatal(err)
	}
	if txs != 1 {
		t.Fatalf("%d commits queued behind a group in flight went in %d transactions; want 1", len(vs), txs)
	}
}

// TestGroupGoesPastAStalledGroup: commits queued behind a group that does
// not finish go as a second group once it has held them for the stall
// time, and commit while it is still held.
func TestGroupGoesPastAStalledGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t, pgstore.Options{})
	pgstore.SetStall(st, time.Millisecond)
	x, err := session.FromUserMessage(ctx, st, "x")
	if err != nil {
		t.Fatal(err)
	}
	v := rootsApart(t, 1)[0]
	release := pgstoretest.HoldGroup(t, st, x)
	done := make(chan error, 1)
	go func() { _, err := st.Put(ctx, v); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a commit queued behind a held group did not go past it")
	}
	release()
}
