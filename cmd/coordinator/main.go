// Command coordinator serves Rath's HTTP API, publishes step jobs to
// JetStream and reconciles lost steps. Configuration comes from flags and
// the environment:
//
//	RATH_STORE       store URL (postgres://… or sqlite:PATH)      --store
//	NATS_URL         NATS server URL (default nats://127.0.0.1:4222) --nats
//	RATH_NATS_REPLICAS replicas of the JetStream streams (default 1) --nats-replicas
//	RATH_EVENTS_MAX_BYTES bound of the events stream, oldest dropped first
//	                 (default 256MiB; same on every process)         --events-max-bytes
//	RATH_ADDR        listen address (default :7420)                --addr
//	RATH_TOKEN       bootstrap admin token (default tenant); turns auth on
//	RATH_AUTH        auth mode: required, off or auto (default)  --auth
//	RATH_SANDBOX_POLICY  the operator's sandbox policy (YAML)     --sandbox-policy
//	                 (default: docker only on Postgres, local and docker on
//	                 SQLite; the workers must load the same; docs/sandboxes.md)
//	RATH_TOOLS       tools the workers offer beyond the built-ins, --tools
//	                 comma-separated ("*": any; docs/tools.md); an agent
//	                 naming another is refused at submit
//	RATH_MCP_ALLOW   the MCP commands the workers run (theirs: the same
//	                 list; "*": any; unset: none); an agent whose MCP
//	                 server runs another is refused at submit  --mcp-allow
//	RATH_MAX_IMPORT_BYTES  largest session import body (default 64 MiB) --max-import-bytes
//	OTEL_EXPORTER_OTLP_ENDPOINT  OTLP/HTTP trace collector (unset: no tracing)
//	OTEL_SERVICE_NAME            service name (default rath-coordinator)
//	RATH_JAEGER_URL  Jaeger UI base for the web UI's trace links
//	RATH_LOG_FORMAT, RATH_LOG_LEVEL  json (default) or text; info (default)
//	RATH_HEALTH_ADDR  a separate listener for /healthz, /readyz, /metrics --health-addr
//	RATH_HTTP_READ_HEADER_TIMEOUT, _READ_TIMEOUT, _WRITE_TIMEOUT, _IDLE_TIMEOUT
//	                 the API server's timeouts (10s, 30s, 60s, 120s)
//	RATH_HTTP_MAX_CONNS  the API listener's connection cap (default 4096)
//	RATH_EVENT_STREAMS_PER_TOKEN, RATH_EVENT_STREAMS_PER_TENANT  live
//	                 GET /v1/runs/{id}/events streams allowed (default 8, 100)
//
// The listener also serves Prometheus /metrics and the web UI at /ui/.
//
//	RATH_NATS_USER, RATH_NATS_PASSWORD (or _FILE), RATH_NATS_CREDS: NATS
//	                 credentials of the coordinator role (docs/security.md)
//
// RATH_STORE and RATH_TOKEN may be given as RATH_STORE_FILE and
// RATH_TOKEN_FILE. Secrets in the environment or in --store/--nats are
// taken out of the process's environment block and command line at start
// (app.HideSecrets).
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
	"os"
	"strconv"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/coordinator"
	"github.com/rath-run/rath/internal/natsauth"
	"github.com/rath-run/rath/internal/telemetry"
	"github.com/rath-run/rath/pkg/sandbox/policy"
)

func main() {
	// Before anything reads them: secrets out of /proc's view of this
	// process (docs/security.md).
	if err := app.HideSecrets(); err != nil {
		fmt.Fprintln(os.Stderr, "coordinator:", err)
		os.Exit(1)
	}
	app.Main("coordinator", run)
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("coordinator", flag.ContinueOnError)
	conn := app.StoreNATSFlags(fs)
	addr := fs.String("addr", cmp.Or(os.Getenv("RATH_ADDR"), ":7420"), "listen address")
	interval := fs.Duration("reconcile-interval", 0, "how often the reconciler scans for lost steps (default 10s)")
	staleAfter := fs.Duration("stale-after", 0, "how long an unfinished step may go untouched before it is reconciled (default 2m)")
	sandboxPolicy := fs.String("sandbox-policy", os.Getenv("RATH_SANDBOX_POLICY"), "operator's sandbox policy, a YAML file (default: docker only on Postgres; docs/sandboxes.md)")
	healthAddr := fs.String("health-addr", os.Getenv("RATH_HEALTH_ADDR"), "separate listen address for /healthz, /readyz and /metrics, outside the API's connection cap (empty: none)")
	authMode := fs.String("auth", os.Getenv("RATH_AUTH"), "API authentication: required, off, or auto (required when RATH_TOKEN is set or a live token is stored; docs/security.md)")
	tools := fs.String("tools", os.Getenv("RATH_TOOLS"), "tools the workers offer beyond the built-ins, comma-separated (\"*\": any); an agent naming another is refused at submit")
	mcpAllow := fs.String("mcp-allow", os.Getenv("RATH_MCP_ALLOW"), "MCP server commands the workers run (their RATH_MCP_ALLOW), comma-separated (\"*\": any; empty: none)")
	// The environment's value is the flag's default, as for the store
	// flags; a malformed one is reported after parsing.
	cacheDefault, cacheErr := time.Second, error(nil)
	if env := os.Getenv("RATH_TOKEN_CACHE"); env != "" {
		if cacheDefault, cacheErr = time.ParseDuration(env); cacheErr != nil {
			cacheErr = fmt.Errorf("RATH_TOKEN_CACHE: %q is not a duration (e.g. 1s, or 0 to ask the store on every request)", env)
		}
	}
	tokenCache := fs.Duration("token-cache", cacheDefault, "how long a verified API token is trusted before the store is asked again: a revocation through this coordinator takes effect at once, one through another coordinator or the store within this (0: ask on every request; env RATH_TOKEN_CACHE)")
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
	if cacheErr != nil {
		return cacheErr
	}
	if *tokenCache < 0 {
		return fmt.Errorf("--token-cache: %v is negative; give a duration, or 0 to ask the store on every request", *tokenCache)
	}
	if *maxImport < 0 {
		return fmt.Errorf("--max-import-bytes: %d is negative; give a byte count, or 0 for the default 64 MiB", *maxImport)
	}
	if err := conn.Check(); err != nil {
		return err
	}
	offer, err := app.ToolOffer(*tools)
	if err != nil {
		return err
	}
	limits, err := app.HTTPLimitsFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	perToken, err := envInt("RATH_EVENT_STREAMS_PER_TOKEN")
	if err != nil {
		return err
	}
	perTenant, err := envInt("RATH_EVENT_STREAMS_PER_TENANT")
	if err != nil {
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
		Bus:      bus.Config{Replicas: conn.Replicas, EventsMaxBytes: conn.EventsMaxBytes},
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
	pol, err := app.SandboxPolicy(*sandboxPolicy, b, os.Getenv)
	if err != nil {
		return err
	}
	log.Info("sandbox policy", slog.Any("backends", pol.Backends), slog.String("default", pol.Default),
		slog.String("egress_network", pol.Docker.EgressNetwork))
	if requireAuth && pol.Allows(policy.Local) {
		log.Warn("the sandbox policy allows the local backend: every token holder's tools can run on the worker host (docs/sandboxes.md)")
	}
	tenants, err := app.TenantPools(conn.StoreURL)
	if err != nil {
		return err
	}
	if tenants != nil {
		defer tenants.Close()
	}
	cfg := coordinator.Config{
		Token: os.Getenv("RATH_TOKEN"), RequireAuth: requireAuth, Tokens: tokens, TokenCacheTTL: *tokenCache,
		ReconcileInterval: *interval, StaleAfter: *staleAfter, Logger: log,
		// OpenBackend opens the graph and run stores from one URL.
		SameDatabase:   b.SubmitInOneTx(),
		RunReads:       b.RunReads,
		TracerProvider: tel.TracerProvider, Metrics: tel.Metrics, Gatherer: tel.Registry,
		JaegerURL: os.Getenv("RATH_JAEGER_URL"),
		Memory:    b.Memory, // /v1/memory for requests bound to no tenant
		// Placements entering through the API are checked against it.
		SandboxPolicy:        pol,
		EventStreamsPerToken: perToken, EventStreamsPerTenant: perTenant,
		MaxImportBytes: *maxImport,
		// What the workers offer agents: specs naming other tools or MCP
		// commands are refused at submit.
		Tools: offer, MCP: app.MCPOffer(*mcpAllow),
	}
	if err := app.RegisterBackendMetrics(ctx, tel.Registry, b, true, bus.DefaultQueue); err != nil {
		return err
	}
	if tenants != nil {
		cfg.Tenants = tenants
	}
	// gc, pins, redaction and check for requests bound to no tenant
	// (authentication off); tenants' go through their pools.
	if cfg.Retention, err = b.Retention(); err != nil {
		return err
	}
	c, err := coordinator.New(b.Store, b.Runs, b.Bus, cfg)
	if err != nil {
		return err
	}
	// The event feed, the workflow driver and the reconciler run beside
	// the API. They outlive the signal (WithoutCancel) so that the API's
	// requests in flight, step waits among them, finish while it drains;
	// then they stop, in reverse order, and are waited for: the driver
	// hands its runs back and both leases are released for the next
	// replica.
	services := c.Services()
	if err := services.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	defer services.Stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	healthDone := make(chan error, 1)
	if *healthAddr != "" {
		go func() {
			err := app.ServeHTTP(ctx, *healthAddr, c.HealthHandler(), app.HealthHTTPLimits, 5*time.Second)
			if err != nil {
				cancel() // without its health listener the process would look dead: stop
			}
			healthDone <- err
		}()
		log.Info("coordinator health listening", slog.String("addr", *healthAddr))
	} else {
		healthDone <- nil
	}
	// Listen before saying so, and say the address the listener has: with
	// --addr 127.0.0.1:0 that is the port the kernel chose, which scripts
	// read from this line.
	ln, err := limits.Listen(ctx, *addr)
	if err == nil {
		log.Info("coordinator listening", slog.String("addr", ln.Addr().String()), slog.Int("max_conns", limits.MaxConns))
		err = app.Serve(ctx, ln, c.Handler(), limits, 10*time.Second)
	}
	cancel()
	err = errors.Join(err, <-healthDone)
	log.Info("coordinator API stopped; stopping its services")
	services.Stop()
	log.Info("coordinator stopped")
	return err
}

// envInt reads a non-negative integer from the environment (0 when unset).
func envInt(name string) (int, error) {
	s := os.Getenv(name)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive integer", name, s)
	}
	return n, nil
}
