package auth_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/bus/embedded"
	"github.com/rath-run/rath/internal/coordinator"
	"github.com/rath-run/rath/internal/natsauth"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/internal/worker"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/session"
)

// TestWorkerRoleCannotRewriteTheGraph connects as rath_worker and tries to
// rewrite graph rows: UPDATE, DELETE and TRUNCATE on versions, chunks and
// lineage are refused by privileges (SQLSTATE 42501), before the
// append-only triggers are reached; the token table cannot be read.
func TestWorkerRoleCannotRewriteTheGraph(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sys, dbURL := migrated(t)
	s, err := session.New(ctx, sys, session.User("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fork(ctx); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, testdb.AsRole(t, dbURL, "rath_worker"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var who string
	if err := pool.QueryRow(ctx, `SELECT current_user`).Scan(&who); err != nil || who != "rath_worker" {
		t.Fatalf("current_user = %q, %v", who, err)
	}
	for _, q := range []string{
		`UPDATE versions SET op = 'append'`,
		`UPDATE versions SET tenant = 'other'`,
		`DELETE FROM versions`,
		`TRUNCATE versions CASCADE`,
		`UPDATE chunks SET payload = '{}'`,
		`DELETE FROM chunks`,
		`TRUNCATE chunks`,
		`UPDATE lineage SET op = 'merge'`,
		`DELETE FROM lineage`,
		`TRUNCATE lineage`,
		`SELECT count(*) FROM api_tokens`,
		`INSERT INTO api_tokens (id, hash, scope, created_at) VALUES ('x', repeat('a', 64), 'admin', now())`,
		`UPDATE runs SET target = '{}'`,
		`DELETE FROM runs`,
		`ALTER TABLE versions DISABLE TRIGGER versions_append_only`,
	} {
		_, err := pool.Exec(ctx, q)
		var pgErr *pgconn.PgError
		// 42501 insufficient_privilege; 42501 too for ALTER (must be owner).
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("as rath_worker: %s: err = %v, want insufficient_privilege (42501)", q, err)
		}
	}
	// What a worker does is allowed: read the graph.
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM versions`).Scan(&n); err != nil || n != 2 {
		t.Errorf("as rath_worker: count versions = %d, %v; want 2", n, err)
	}
}

// TestWorkerRoleRunsAStep runs a worker held to both of its roles: its
// store connections act as rath_worker and its NATS connection is the
// worker user (natsauth: binds the streams, may not administer them). It
// starts the step, commits the new version and settles the run, end to end.
func TestWorkerRoleRunsAStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, dbURL := migrated(t)
	users, err := natsauth.ServerUsers([]natsauth.User{
		{Name: "coordinator", Password: "c-pw", Role: natsauth.RoleCoordinator},
		{Name: "worker", Password: "w-pw", Role: natsauth.RoleWorker},
	})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := embedded.Start(ctx, embedded.Options{StoreDir: t.TempDir(), Port: -1, Users: users})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	env := func(user, pw string) func(string) string {
		return func(k string) string {
			return map[string]string{"RATH_NATS_USER": user, "RATH_NATS_PASSWORD": pw}[k]
		}
	}
	coordConnect, err := app.NATSConnectorAs(ns.ClientURL(), "coordinator", natsauth.RoleCoordinator, env("coordinator", "c-pw"))
	if err != nil {
		t.Fatal(err)
	}
	workerConnect, err := app.NATSConnectorAs(ns.ClientURL(), "worker", natsauth.RoleWorker, env("worker", "w-pw"))
	if err != nil {
		t.Fatal(err)
	}
	cb, err := app.OpenBackend(ctx, app.BackendConfig{StoreURL: dbURL, Connect: coordConnect})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cb.Close() })
	wb, err := app.OpenBackend(ctx, app.BackendConfig{StoreURL: testdb.AsRole(t, dbURL, "rath_worker"), Connect: workerConnect, Bus: bus.Config{Bind: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = wb.Close() })
	c, err := coordinator.New(cb.Store, cb.Runs, cb.Bus, coordinator.Config{SameDatabase: true})
	if err != nil {
		t.Fatal(err)
	}
	w, err := app.NewWorker(ctx, wb, func(string) string { return "" }, worker.Config{Name: "restricted", ShutdownTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("worker: %v", err)
		}
	})
	r, err := c.Submit(ctx, api.SubmitRequest{
		Agent:   json.RawMessage(`{"name":"echo","model":"scripted","script":[{"content":"done as rath_worker"}]}`),
		Message: "run me",
	})
	if err != nil {
		t.Fatal(err)
	}
	var got runs.Run
	testenv.Eventually(t, 30*time.Second, "the run settles", func() bool {
		got, err = cb.Runs.Get(ctx, r.ID)
		return err == nil && got.Status.Terminal()
	})
	if got.Status != runs.RunSucceeded || got.Output == nil {
		t.Fatalf("run = %s (%s), want succeeded with an output", got.Status, got.Error)
	}
	out, err := cb.Store.Get(ctx, *got.Output)
	if err != nil {
		t.Fatal(err)
	}
	if out.Producer.Worker != "restricted" {
		t.Errorf("output made by worker %q, want restricted", out.Producer.Worker)
	}
}
