// Package workermain is Rath's worker program as a library: the same flags,
// environment and behavior as cmd/worker (whose documentation lists them),
// with the tool registry open to the caller. It is how a program in a
// module of its own, outside this repository, builds a worker with its own
// Go tools:
//
//	func main() {
//		reg := builtin.NewRegistry() // the six built-ins and their "builtin" group
//		if err := reg.Register(myTool{}); err != nil { // implements tool.Tool
//			log.Fatal(err)
//		}
//		workermain.Main(workermain.Options{Tools: reg})
//	}
//
// Agents then name the tool in their spec (tools: [builtin, my_tool]); a
// spec naming a tool the worker does not have fails its step, naming the
// entry. examples/05_custom_tool is such a program, with a go.mod of its
// own. The contract is the program's: flags and environment as cmd/worker,
// exit 0 after a graceful shutdown on SIGTERM, 1 on an error.
package workermain

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
	"github.com/rath-run/rath/pkg/tool"
)

// Options are what a worker program adds to the stock worker.
type Options struct {
	// Tools are the tools agents may choose by name; nil means the six
	// built-ins and their "builtin" group (builtin.NewRegistry). Start from
	// builtin.NewRegistry and Register your own to keep the built-ins.
	Tools *tool.Registry
}

// Main runs the worker with the process's arguments and environment and
// exits: 0 after a graceful shutdown (SIGTERM or SIGINT), 1 on an error.
// Call it from main; it never returns.
func Main(opts Options) {
	// Before anything reads them: secrets out of /proc's view of this
	// process (docs/security.md).
	if err := app.HideSecrets(); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
	app.Main("worker", func(ctx context.Context, args []string) error { return run(ctx, args, opts) })
}

func run(ctx context.Context, args []string, opts Options) error {
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
	linger := fs.Duration("event-linger", worker.DefaultEventLinger, "how long a step holds its events: one that ends within it sends them with its end as one message; a longer step's start is seen this late (negative: each event at once)")
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
		Bus:    bus.Config{AckWait: *ackWait, Bind: natsauth.Configured(os.Getenv), Replicas: conn.Replicas, EventsMaxBytes: conn.EventsMaxBytes},
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
		Name: *name, Queue: *queue, Slots: slots, ShutdownTimeout: *shutdown, Heartbeat: *heartbeat, EventLinger: *linger, Logger: log,
		TracerProvider: tel.TracerProvider, Metrics: tel.Metrics, SandboxPolicy: pol, Tools: opts.Tools,
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
