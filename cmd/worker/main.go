// Command worker pulls step jobs from JetStream, runs agents and commits new
// session versions. Configuration comes from flags and the environment:
//
//	RATH_STORE      store URL (postgres://… or sqlite:PATH)        --store
//	NATS_URL        NATS server URL (default nats://127.0.0.1:4222) --nats
//	RATH_NATS_REPLICAS replicas of the JetStream streams (default 1) --nats-replicas
//	RATH_QUEUE      job queue (default "default")                   --queue
//	RATH_SLOTS      concurrent steps (default 4)                    --slots
//	RATH_HEALTH     health listen address (default :7421)           --health
//	                (serves /healthz, /readyz and Prometheus /metrics)
//	OTEL_EXPORTER_OTLP_ENDPOINT  OTLP/HTTP trace collector (unset: no tracing)
//	OTEL_SERVICE_NAME            service name (default rath-worker)
//	RATH_LOG_FORMAT, RATH_LOG_LEVEL  json (default) or text; info (default)
//	RATH_NATS_USER, RATH_NATS_PASSWORD (or _FILE), RATH_NATS_CREDS: NATS
//	                credentials of the worker role (docs/security.md)
//
// --ack-wait sets the queue consumer's ack deadline (default 30s) and
// --heartbeat how often a running step extends it (default the shorter of
// 5s and a third of the ack wait; one at or over the ack wait is refused).
//
// RATH_SANDBOX_POLICY (--sandbox-policy) is the operator's sandbox policy, a
// YAML file naming the backends tenants' tools may run on and what a docker
// sandbox may be; without one, a worker on Postgres runs tools only in
// docker containers with no network, and one on SQLite also on "local"
// (docs/sandboxes.md).
//
// Model credentials come from OPENAI_API_KEY and friends (docs/models.md).
// RATH_SCRIPT_DIR names the directory whose files specs may name as
// model scripted:<name> (unset: that form is refused); RATH_MODELS lists
// further models that get their own metrics label (others are "other").
// Secrets may be given as NAME_FILE (RATH_STORE_FILE, OPENAI_API_KEY_FILE,
// …; app.FileSecrets); those in the environment or in --store/--nats are
// taken out of the process's environment block and command line at start
// (app.HideSecrets), so no tool reads them from /proc.
// RATH_LOCAL_USER ("uid:gid", default 65534:65534) is the user a root
// worker runs local tools as; RATH_WORKSPACE_MAX_BYTES also limits each
// workspace while tools run (docs/sandboxes.md).
// RATH_MCP_ALLOW lists the MCP server commands agent specs may run on this
// host (comma-separated, "*" for any; unset: none; docs/tools.md).
// SIGTERM stops pulling, lets steps finish within --shutdown-timeout, and
// exits 0.
package main

import (
	"cmp"
	"context"
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
	"github.com/rath-run/rath/internal/natsauth"
	"github.com/rath-run/rath/internal/telemetry"
	"github.com/rath-run/rath/internal/worker"
)

func main() {
	// Before anything reads them: secrets out of /proc's view of this
	// process (docs/security.md).
	if err := app.HideSecrets(); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
	app.Main("worker", run)
}

func run(ctx context.Context, args []string) error {
	slots, _ := strconv.Atoi(os.Getenv("RATH_SLOTS"))
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	conn := app.StoreNATSFlags(fs)
	queue := fs.String("queue", cmp.Or(os.Getenv("RATH_QUEUE"), "default"), "job queue")
	fs.IntVar(&slots, "slots", cmp.Or(slots, 4), "concurrent steps")
	health := fs.String("health", cmp.Or(os.Getenv("RATH_HEALTH"), ":7421"), "health listen address (empty: off)")
	name := fs.String("name", os.Getenv("RATH_WORKER_NAME"), "worker name (default host-pid)")
	shutdown := fs.Duration("shutdown-timeout", 30*time.Second, "time steps in flight get to finish on SIGTERM")
	ackWait := fs.Duration("ack-wait", 0, "ack deadline of a delivered job (default 30s)")
	sandboxPolicy := fs.String("sandbox-policy", os.Getenv("RATH_SANDBOX_POLICY"), "operator's sandbox policy, a YAML file (default: docker only on Postgres; docs/sandboxes.md)")
	heartbeat := fs.Duration("heartbeat", 0, "InProgress heartbeat interval of a running step (default min(5s, ack wait/3))")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := conn.Check(); err != nil {
		return err
	}
	log := app.NewLogger(os.Stderr, os.Getenv)
	if os.Geteuid() != 0 {
		log.Warn("local sandbox tools run as the worker's own user (it is not root): they cannot read its environment or memory, but can read every file it can and its workspaces are not size-limited while they run (docs/sandboxes.md)")
	}
	tel, err := app.NewTelemetry(ctx, "rath-worker", os.Getenv)
	if err != nil {
		return err
	}
	defer func() { _ = tel.Shutdown(context.WithoutCancel(ctx)) }()
	otel.SetTracerProvider(tel.TracerProvider)
	otel.SetTextMapPropagator(telemetry.Propagator())
	connect, err := app.NATSConnectorAs(conn.NATSURL, "rath-worker", natsauth.RoleWorker, os.Getenv)
	if err != nil {
		return err
	}
	b, err := app.OpenBackend(ctx, app.BackendConfig{
		StoreURL: conn.StoreURL,
		Connect:  connect,
		// A worker with NATS credentials may not administer streams: it
		// binds the ones the coordinator declared (docs/security.md).
		Bus:    bus.Config{AckWait: *ackWait, Bind: natsauth.Configured(os.Getenv), Replicas: conn.Replicas},
		Logger: log,
	})
	if err != nil {
		return err
	}
	defer app.CloseWithin(b, 5*time.Second, log)
	pol, err := app.SandboxPolicy(*sandboxPolicy, b, os.Getenv)
	if err != nil {
		return err
	}
	log.Info("sandbox policy", slog.Any("backends", pol.Backends), slog.String("default", pol.Default),
		slog.String("egress_network", pol.Docker.EgressNetwork))
	w, err := app.NewWorker(ctx, b, os.Getenv, worker.Config{
		Name: *name, Queue: *queue, Slots: slots, ShutdownTimeout: *shutdown, Heartbeat: *heartbeat, Logger: log,
		TracerProvider: tel.TracerProvider, Metrics: tel.Metrics, SandboxPolicy: pol,
	})
	if err != nil {
		return err
	}
	if err := app.RegisterBackendMetrics(ctx, tel.Registry, b, false, *queue); err != nil {
		return err
	}
	if *health != "" {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", telemetry.Handler(tel.Registry))
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
		mux.HandleFunc("GET /readyz", readyz(ctx, b.NC.IsConnected))
		// It outlives ctx: /readyz says "draining" until Run returns.
		ln, err := app.HealthHTTPLimits.Listen(ctx, *health)
		if err != nil {
			return err
		}
		srv := app.HealthHTTPLimits.Server(mux)
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
	}
	return w.Run(ctx)
}

// readyz answers 503 once ctx has ended (SIGTERM: the worker pulls no more
// jobs and is draining the steps in flight) or while NATS is not
// connected, and 200 otherwise.
func readyz(ctx context.Context, connected func() bool) http.HandlerFunc {
	return func(rw http.ResponseWriter, _ *http.Request) {
		if ctx.Err() != nil {
			http.Error(rw, "draining: no new jobs", http.StatusServiceUnavailable)
			return
		}
		if !connected() {
			http.Error(rw, "nats: not connected", http.StatusServiceUnavailable)
			return
		}
		_, _ = rw.Write([]byte("ready\n"))
	}
}
