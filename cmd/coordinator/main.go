// Command coordinator serves Rath's HTTP API, publishes step jobs to
// JetStream and reconciles lost steps. Configuration comes from flags and
// the environment:
//
//	RATH_STORE       store URL (postgres://… or sqlite:PATH)      --store
//	NATS_URL         NATS server URL (default nats://127.0.0.1:4222) --nats
//	RATH_NATS_REPLICAS replicas of the JetStream streams (default 1) --nats-replicas
//	RATH_ADDR        listen address (default :7420)                --addr
//	RATH_TOKEN       bootstrap admin token (default tenant); turns auth on
//	RATH_AUTH        auth mode: required, off or auto (default)  --auth
//	RATH_MAX_IMPORT_BYTES  largest session import body (default 64 MiB) --max-import-bytes
//	OTEL_EXPORTER_OTLP_ENDPOINT  OTLP/HTTP trace collector (unset: no tracing)
//	OTEL_SERVICE_NAME            service name (default rath-coordinator)
//	RATH_JAEGER_URL  Jaeger UI base for the web UI's trace links
//	RATH_LOG_FORMAT, RATH_LOG_LEVEL  json (default) or text; info (default)
//
// The listener also serves Prometheus /metrics and the web UI at /ui/.
//
//	RATH_NATS_USER, RATH_NATS_PASSWORD (or _FILE), RATH_NATS_CREDS: NATS
//	                 credentials of the coordinator role (docs/security.md)
//
// `coordinator migrate` applies the migrations and exits.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/coordinator"
	"github.com/rath-run/rath/internal/natsauth"
	"github.com/rath-run/rath/internal/telemetry"
)

func main() { app.Main("coordinator", run) }

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("coordinator", flag.ContinueOnError)
	conn := app.StoreNATSFlags(fs)
	addr := fs.String("addr", cmp.Or(os.Getenv("RATH_ADDR"), ":7420"), "listen address")
	interval := fs.Duration("reconcile-interval", 0, "how often the reconciler scans for lost steps (default 10s)")
	staleAfter := fs.Duration("stale-after", 0, "how long an unfinished step may go untouched before it is reconciled (default 2m)")
	authMode := fs.String("auth", os.Getenv("RATH_AUTH"), "API authentication: required, off, or auto (required when RATH_TOKEN is set or a live token is stored; docs/security.md)")
	maxImport := fs.Int64("max-import-bytes", 0, "largest session import body in bytes (default 64 MiB; env RATH_MAX_IMPORT_BYTES)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if env := os.Getenv("RATH_MAX_IMPORT_BYTES"); *maxImport == 0 && env != "" {
		n, err := strconv.ParseInt(env, 10, 64)
		if err != nil {
			return fmt.Errorf("RATH_MAX_IMPORT_BYTES: %q is not a byte count", env)
		}
		*maxImport = n
	}
	if *maxImport < 0 {
		return fmt.Errorf("--max-import-bytes: %d is negative; give a byte count, or 0 for the default 64 MiB", *maxImport)
	}
	if err := conn.Check(); err != nil {
		return err
	}
	log := app.NewLogger(os.Stderr, os.Getenv)
	tel, err := app.NewTelemetry(ctx, "rath-coordinator", os.Getenv)
	if err != nil {
		return err
	}
	defer func() { _ = tel.Shutdown(context.WithoutCancel(ctx)) }()
	otel.SetTracerProvider(tel.TracerProvider)
	otel.SetTextMapPropagator(telemetry.Propagator())
	connect, err := app.NATSConnectorAs(conn.NATSURL, "rath-coordinator", natsauth.RoleCoordinator, os.Getenv)
	if err != nil {
		return err
	}
	b, err := app.OpenBackend(ctx, app.BackendConfig{
		StoreURL: conn.StoreURL,
		Connect:  connect,
		Migrate:  true,
		Bus:      bus.Config{Replicas: conn.Replicas},
		Logger:   log,
	})
	if err != nil {
		return err
	}
	defer app.CloseWithin(b, 5*time.Second, log)
	if fs.Arg(0) == "migrate" {
		log.Info("migrations applied")
		return nil
	}
	tokens, err := b.TokenStore()
	if err != nil {
		return err
	}
	requireAuth, err := app.AuthMode(ctx, *authMode, os.Getenv("RATH_TOKEN"), tokens)
	if err != nil {
		return err
	}
	if !requireAuth {
		log.Warn("API authentication is off: anyone who reaches the address may use the API (set RATH_TOKEN or --auth required)")
	}
	tenants, err := app.TenantPools(conn.StoreURL)
	if err != nil {
		return err
	}
	if tenants != nil {
		defer tenants.Close()
	}
	cfg := coordinator.Config{
		Token: os.Getenv("RATH_TOKEN"), RequireAuth: requireAuth, Tokens: tokens,
		ReconcileInterval: *interval, StaleAfter: *staleAfter, Logger: log,
		// OpenBackend opens the graph and run stores from one URL.
		SameDatabase:   b.SubmitInOneTx(),
		RunReads:       b.RunReads,
		TracerProvider: tel.TracerProvider, Metrics: tel.Metrics, Gatherer: tel.Registry,
		JaegerURL:      os.Getenv("RATH_JAEGER_URL"),
		Memory:         b.Memory, // /v1/memory for requests bound to no tenant
		MaxImportBytes: *maxImport,
	}
	if err := app.RegisterBackendMetrics(ctx, tel.Registry, b, true, bus.DefaultQueue); err != nil {
		return err
	}
	if tenants != nil {
		cfg.Tenants = tenants
	}
	c, err := coordinator.New(b.Store, b.Runs, b.Bus, cfg)
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: *addr, Handler: c.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = c.RunReconciler(ctx) }()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("coordinator listening", slog.String("addr", *addr))
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
