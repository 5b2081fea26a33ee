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
