package coordinator

import (
	"context"
	"net/http"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/telemetry"
	"github.com/rath-run/rath/pkg/session"
)

// publishSpan starts the producer span of a step job and writes its trace
// context into hdr, so the worker's span continues the trace. ctx is the
// run's context (telemetry.RunContext); opts may link the caller's span.
func (c *Coordinator) publishSpan(ctx context.Context, job bus.Job, hdr nats.Header, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	queue := job.Queue
	if queue == "" {
		queue = bus.DefaultQueue
	}
	opts = append(opts, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(telemetry.AttrRunID.String(job.RunID), telemetry.AttrStepID.String(job.StepID),
			telemetry.AttrQueue.String(queue), telemetry.AttrSessionVersion.String(job.Input)))
	ctx, span := telemetry.Tracer(c.cfg.TracerProvider).Start(ctx, "publish "+bus.JobSubject(queue), opts...)
	telemetry.InjectNATS(ctx, hdr)
	return ctx, span
}

func endSpan(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, telemetry.Redact(err.Error()))
	}
	span.End()
}

// instrument adds GET /metrics and the web UI to mux and wraps the whole
// handler in request spans (continuing a caller's W3C trace context) and
// request counts.
func (c *Coordinator) instrument(mux *http.ServeMux) http.Handler {
	if c.cfg.Gatherer != nil {
		mux.Handle("GET /metrics", telemetry.Handler(c.cfg.Gatherer))
	}
	c.uiRoutes(mux)
	var h http.Handler = mux
	h = c.cfg.Metrics.InstrumentHTTP(h)
	if c.cfg.TracerProvider != nil {
		h = otelhttp.NewHandler(h, "rath-coordinator",
			otelhttp.WithTracerProvider(c.cfg.TracerProvider),
			otelhttp.WithPropagators(telemetry.Propagator()),
			otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
				if r.Pattern != "" {
					return r.Pattern
				}
				return r.Method + " " + r.URL.Path
			}),
		)
	}
	return h
}

// tracedGraph is the workflow driver's graph: each version it commits (a
// fan-out's forks and merges) is a "store commit {op}" span of the drive,
// so they show in the run's trace beside its steps.
type tracedGraph struct {
	session.Graph
	tracer trace.Tracer
	runID  string
}

// driverGraph returns g traced for run runID's driver (g itself without a
// tracer provider).
func (c *Coordinator) driverGraph(g session.Graph, runID string) session.Graph {
	if c.cfg.TracerProvider == nil {
		return g
	}
	return tracedGraph{Graph: g, tracer: telemetry.Tracer(c.cfg.TracerProvider), runID: runID}
}

// Put implements session.Graph.
func (g tracedGraph) Put(ctx context.Context, v *session.Version) (*session.Version, error) {
	if v == nil {
		return g.Graph.Put(ctx, v)
	}
	ctx, span := g.tracer.Start(ctx, "store commit "+string(v.Op),
		trace.WithAttributes(telemetry.AttrRunID.String(g.runID)))
	got, err := g.Graph.Put(ctx, v)
	if err == nil {
		span.SetAttributes(telemetry.AttrSessionVersion.String(got.ID.String()))
	}
	endSpan(span, err)
	return got, err
}
