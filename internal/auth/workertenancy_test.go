package auth_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/pgstore"
)

// TestWorkerRoleStaysInItsStep attacks at the SQL layer as rath_worker
// (migration 00016): the worker role may write graph rows only for a step
// that is running and only in its run's tenant, may point a step only at
// the version keyed by that step and a run only at one of its steps'
// versions, and cannot touch ended runs. The system connection, for its
// part, cannot join versions of two tenants nor make a version without a
// tenant.
func TestWorkerRoleStaysInItsStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sys, dbURL := migrated(t)
	open := func(url string) *pgstore.Store {
		st, err := pgstore.Open(ctx, url, pgstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	// Each tenant's input through a tenant connection, as the coordinator
	// makes it.
	acmeConn, umbrellaConn := open(asTenant(t, dbURL, "acme")), open(asTenant(t, dbURL, "umbrella"))
	rs, rdb, err := runs.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	// A running step of acme's and one of umbrella's.
	start := func(st *pgstore.Store, text string) (session.Session, runs.Run) {
		in, err := session.FromUserMessage(ctx, st, text)
		if err != nil {
			t.Fatal(err)
		}
		r := runs.Run{ID: runs.NewRunID(), Queue: "q", Target: []byte(`{}`), Input: in.ID(), Kind: runs.KindAgent}
		if err := rs.Create(ctx, &r, []runs.Step{{Ordinal: 0, Input: in.ID()}}); err != nil {
			t.Fatal(err)
		}
		if _, err := rs.StartStep(ctx, r.Steps[0].ID, "w"); err != nil {
			t.Fatal(err)
		}
		return in, r
	}
	acmeIn, acmeRun := start(acmeConn, "acme's input")
	umbrellaIn, umbrellaRun := start(umbrellaConn, "umbrella's input")
	owner, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(owner.Close)
	if got := tenantOf(t, owner, acmeIn.ID()); got != "acme" {
		t.Fatalf("acme's input belongs to %q", got)
	}
	var runTenant string
	if err := owner.QueryRow(ctx, `SELECT tenant FROM runs WHERE id = $1`, acmeRun.ID).Scan(&runTenant); err != nil || runTenant != "acme" {
		t.Fatalf("acme's run belongs to %q, %v", runTenant, err)
	}

	workerURL := testdb.AsRole(t, dbURL, "rath_worker")
	worker := open(workerURL)
	acmeStep := session.Producer{Run: acmeRun.ID, Step: acmeRun.Steps[0].ID}
	umbrellaStep := session.Producer{Run: umbrellaRun.ID, Step: umbrellaRun.Steps[0].ID}
	refused := func(what string, err error, codes ...string) {
		t.Helper()
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			for _, c := range codes {
				if pgErr.Code == c {
					return
				}
			}
		}
		for _, c := range codes {
			if err != nil && strings.Contains(err.Error(), "("+c+")") {
				return
			}
		}
		t.Errorf("%s: err = %v, want SQLSTATE %v", what, err, codes)
	}
	onAcme, err := session.Open(ctx, worker, acmeIn.ID())
	if err != nil {
		t.Fatal(err)
	}
	// A version in acme's tenant while running umbrella's step.
	_, err = onAcme.Extend(ctx, session.Extension{Op: session.OpStep, Chunks: []session.Chunk{session.Assistant("x")}, Producer: umbrellaStep})
	refused("as rath_worker: a version of acme's for umbrella's step", err, "42501")
	// A root version stated for acme, for umbrella's step.
	acmeWorker := open(workerURL + "&rath.tenant=acme")
	planted := &session.Version{ID: session.NewID(), Op: session.OpCreate, Chunks: []session.Chunk{session.User("planted")},
		Len: 1, Producer: umbrellaStep, CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	if err := session.Seal(planted, nil, nil); err != nil {
		t.Fatal(err)
	}
	_, err = acmeWorker.Put(ctx, planted)
	refused("as rath_worker: a root version of acme's, for umbrella's step", err, "42501")
	// A version for no running step.
	_, err = onAcme.Extend(ctx, session.Extension{Chunks: []session.Chunk{session.Assistant("x")}})
	refused("as rath_worker: a version for no step", err, "42501")
	// The worker's own step: allowed.
	out, err := onAcme.Extend(ctx, session.Extension{Op: session.OpStep, Chunks: []session.Chunk{session.Assistant("acme's answer")}, Producer: acmeStep, Key: acmeStep.Step})
	if err != nil {
		t.Fatalf("as rath_worker: acme's own step output: %v", err)
	}
	umbrellaOut, err := umbrellaIn.Extend(ctx, session.Extension{Op: session.OpStep, Chunks: []session.Chunk{session.Assistant("u")}, Producer: umbrellaStep})
	if err != nil {
		t.Fatal(err)
	}

	pool, err := pgxpool.New(ctx, workerURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	for _, q := range []struct{ what, sql string }{
		{"a step's output set to another version", `UPDATE steps SET output_id = '` + umbrellaOut.ID().String() + `' WHERE id = '` + acmeStep.Step + `'`},
		{"a run's output set to another tenant's version", `UPDATE runs SET output_id = '` + umbrellaOut.ID().String() + `' WHERE id = '` + acmeRun.ID + `'`},
		{"a run's output set to its input", `UPDATE runs SET output_id = input_id WHERE id = '` + acmeRun.ID + `'`},
		{"a run's tenant", `UPDATE runs SET tenant = 'umbrella' WHERE id = '` + acmeRun.ID + `'`},
	} {
		_, err := pool.Exec(ctx, q.sql)
		refused("as rath_worker: "+q.what, err, "42501")
	}
	// Settling its own step is allowed; then the run has ended and is out
	// of the worker's reach.
	if _, err := rs.CommitStep(ctx, acmeStep.Step, out.ID()); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`UPDATE runs SET status = 'failed', error = 'forged' WHERE id = '` + acmeRun.ID + `'`,
		`UPDATE steps SET status = 'failed', error = 'forged' WHERE id = '` + acmeStep.Step + `'`,
	} {
		tag, err := pool.Exec(ctx, q)
		if err != nil || tag.RowsAffected() != 0 {
			t.Errorf("as rath_worker: %s: %d rows, %v; want none", q, tag.RowsAffected(), err)
		}
	}
	// After the step ended, nothing more is written for it.
	_, err = onAcme.Extend(ctx, session.Extension{Op: session.OpStep, Chunks: []session.Chunk{session.Assistant("late")}, Producer: acmeStep})
	refused("as rath_worker: a version for an ended step", err, "42501")

	// The system connection: no version joins two tenants, and a root
	// without a tenant is refused.
	a, err := session.Open(ctx, sys, acmeIn.ID())
	if err != nil {
		t.Fatal(err)
	}
	u, err := session.Open(ctx, sys, umbrellaIn.ID())
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Merge(ctx, u)
	refused("(system) merging acme's and umbrella's versions", err, "23514")
	orphan := session.NewID()
	if _, err := owner.Exec(ctx, `INSERT INTO versions (id, op, len, own_count, parent_count, created_at, hash, lane, pos)
		VALUES ($1, 'create', 0, 0, 0, now(), repeat('0', 64), $1, 0)`, orphan); err == nil {
		t.Error("(system) a root version without a tenant was stored")
	} else {
		refused("(system) a root version without a tenant", err, "23502")
	}
	var n int
	if err := owner.QueryRow(ctx, `SELECT count(*) FROM versions WHERE tenant NOT IN ('acme', 'umbrella')`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d versions outside the two tenants, %v", n, err)
	}
}

// asTenant returns dbURL as a tenant connection of tenant (the startup
// parameters of auth.TenantPools).
func asTenant(t *testing.T, dbURL, tenant string) string {
	t.Helper()
	return testdb.WithParams(t, dbURL, "role", "rath_coordinator", "rath.tenant", tenant)
}
