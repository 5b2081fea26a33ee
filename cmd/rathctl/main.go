// Command rathctl is Rath's command-line client: it reads and writes the
// Session Graph, submits and watches runs, and runs the whole system on a
// laptop with `rathctl dev`.
//
// With OTEL_EXPORTER_OTLP_ENDPOINT set, each command is one trace: a root
// span named for the command, and a client span per API request whose W3C
// trace context the coordinator continues (docs/observability.md).
package main

import (
	"context"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/rath-run/rath/internal/cli"
	"github.com/rath-run/rath/internal/gctune"
	"github.com/rath-run/rath/internal/telemetry"
	"github.com/rath-run/rath/pkg/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx)
	stop()
	os.Exit(code)
}

func run(ctx context.Context) int {
	// dev and bench run the whole stack in this process: the collector
	// gets the servers' defaults (package gctune).
	gctune.Apply(os.Getenv, nil)
	args := os.Args[1:]
	if telemetry.Enabled(os.Getenv) && (len(args) == 0 || args[0] != "dev") {
		tp, shutdown, err := telemetry.NewTracerProvider(ctx, telemetry.TraceConfig{ServiceName: "rathctl", Getenv: os.Getenv})
		if err == nil {
			defer func() { _ = shutdown(context.WithoutCancel(ctx)) }()
			// The process edge: rathctl's API clients (made after this,
			// pkg/client.New) send through the default transport, traced
			// here once: each request is a client span of the command's
			// span, and its traceparent goes to the coordinator.
			otel.SetTracerProvider(tp)
			otel.SetTextMapPropagator(telemetry.Propagator())
			traceDefaultTransport()
			name := "rathctl"
			if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
				name += " " + args[0]
			}
			var span trace.Span
			ctx, span = telemetry.Tracer(tp).Start(ctx, name)
			defer span.End()
		}
	}
	return cli.Main(ctx, args, os.Stdin, os.Stdout, os.Stderr)
}

// traceDefaultTransport makes rathctl's HTTP clients trace their requests:
// http.DefaultTransport becomes otelhttp's wrapper around the clients'
// shared pool (pkg/client.PooledTransport), not around Go's default, which
// keeps 2 idle connections per host.
func traceDefaultTransport() {
	http.DefaultTransport = otelhttp.NewTransport(client.PooledTransport())
}
