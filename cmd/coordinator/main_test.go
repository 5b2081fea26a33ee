package main

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rath-run/rath/internal/bus/embedded"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testenv"
)

// TestShutdownStopsServices runs the coordinator binary's run on SQLite
// and an embedded NATS server: it starts its services (it takes both
// leases), and when its context ends (SIGTERM) it returns only after they
// have stopped: both leases are released for the next replica and no
// goroutine of the coordinator is left.
func TestShutdownStopsServices(t *testing.T) {
	for _, k := range []string{"RATH_TOKEN", "RATH_TOKEN_FILE", "RATH_STORE_FILE", "RATH_AUTH", "RATH_SANDBOX_POLICY",
		"OTEL_EXPORTER_OTLP_ENDPOINT", "RATH_HEALTH_ADDR", "RATH_NATS_USER", "RATH_NATS_PASSWORD", "RATH_NATS_CREDS"} {
		t.Setenv(k, "")
	}
	t.Setenv("RATH_LOG_LEVEL", "error")
	ctx := context.Background()
	dir := t.TempDir()
	ns, err := embedded.Start(ctx, embedded.Options{StoreDir: filepath.Join(dir, "nats"), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	url := "sqlite:" + filepath.Join(dir, "rath.db")
	before := goleak.IgnoreCurrent()

	rctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() {
		done <- run(rctx, []string{"--store", url, "--nats", ns.ClientURL(), "--addr", "127.0.0.1:0", "--reconcile-interval", "1h"})
	}()
	var db *sql.DB
	holder := func(lease string) string {
		t.Helper()
		if db == nil {
			if _, db, err = runs.Open(ctx, url); err != nil {
				return "" // not created yet
			}
		}
		var h string
		err := db.QueryRowContext(ctx, `SELECT holder FROM leases WHERE name = $1`, lease).Scan(&h)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return ""
		}
		return h
	}
	testenv.Eventually(t, 60*time.Second, "the coordinator's services to take their leases", func() bool {
		select {
		case err := <-done:
			t.Fatalf("run returned early: %v", err)
		default:
		}
		return holder("reconciler") != "" && holder("workflows") != ""
	})
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("run did not return within 60s of its context's end")
	}
	for _, lease := range []string{"reconciler", "workflows"} {
		if h := holder(lease); h != "" {
			t.Errorf("lease %s still held by %s after shutdown; want it released", lease, h)
		}
	}
	_ = db.Close()
	// The server's own goroutines for the streams the coordinator made
	// end with it.
	ns.Shutdown()
	goleak.VerifyNone(t, before)
}
