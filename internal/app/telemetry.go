package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/telemetry"
	"github.com/rath-run/rath/pkg/llm"
)

// Telemetry is one process's observability: its tracer provider (no-op
// unless OTEL_EXPORTER_OTLP_ENDPOINT is set), its own Prometheus registry
// and Rath's series on it.
type Telemetry struct {
	TracerProvider trace.TracerProvider
	Registry       *prometheus.Registry
	Metrics        *telemetry.Metrics
	// Shutdown flushes buffered spans; call it before exiting.
	Shutdown func(context.Context) error
}

// NewTelemetry builds a process's telemetry; service is its default
// service.name (OTEL_SERVICE_NAME overrides it). Model labels carry only
// the models getenv configures ([llm.ConfiguredModels]); others are
// "other".
func NewTelemetry(ctx context.Context, service string, getenv func(string) string) (*Telemetry, error) {
	tp, shutdown, err := telemetry.NewTracerProvider(ctx, telemetry.TraceConfig{ServiceName: service, Getenv: getenv})
	if err != nil {
		return nil, err
	}
	reg := telemetry.NewRegistry()
	m := telemetry.NewMetrics(reg)
	m.KnownModels(llm.ConfiguredModels(getenv)...)
	return &Telemetry{TracerProvider: tp, Registry: reg, Metrics: m, Shutdown: shutdown}, nil
}

// RegisterBackendMetrics registers the series sampled from the backend at
// scrape time: rath_queue_pending_jobs/rath_queue_unacked_jobs of each
// queue, and (when activeRuns) rath_active_runs.
func RegisterBackendMetrics(ctx context.Context, reg prometheus.Registerer, b *Backend, activeRuns bool, queues ...string) error {
	for _, q := range queues {
		cons, err := b.Bus.Consumer(ctx, q)
		if err != nil {
			return fmt.Errorf("consumer for queue %s: %w", q, err)
		}
		if err := telemetry.RegisterQueueLag(reg, q, cons.Pending); err != nil {
			return fmt.Errorf("queue lag metric: %w", err)
		}
	}
	if activeRuns {
		if err := telemetry.RegisterActiveRuns(reg, ActiveRuns(b.Runs)); err != nil {
			return fmt.Errorf("active runs metric: %w", err)
		}
	}
	return nil
}

// ActiveRuns counts runs not yet ended (pending, running, waiting or
// needs_review), up to 1,000 of each status.
func ActiveRuns(rs *runs.Store) telemetry.CountFunc {
	return func(ctx context.Context) (int, error) {
		n := 0
		for _, st := range []runs.RunStatus{runs.RunPending, runs.RunRunning, runs.RunWaiting, runs.RunNeedsReview} {
			list, err := rs.List(ctx, runs.ListParams{Limit: 1000, Status: st})
			if err != nil {
				return 0, fmt.Errorf("count %s runs: %w", st, err)
			}
			n += len(list)
		}
		return n, nil
	}
}

// NewLogger returns a process's logger: JSON (the default) or text as
// RATH_LOG_FORMAT says, at RATH_LOG_LEVEL (debug, info, warn, error;
// default info), with trace ids and redaction ([telemetry.NewHandler]).
func NewLogger(w io.Writer, getenv func(string) string) *slog.Logger {
	format := telemetry.LogJSON
	if strings.EqualFold(getenv("RATH_LOG_FORMAT"), "text") {
		format = telemetry.LogText
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(getenv("RATH_LOG_LEVEL"))); err != nil {
		level = slog.LevelInfo
	}
	return telemetry.NewLogger(w, format, level)
}
