package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// A run is one trace. When a run is submitted, the coordinator starts its
// "run {kind}" span ([StartRun]), a child of the submitting request's span
// (which continues the caller's traceparent) or a new root, and records
// the span's W3C traceparent with the run ([TraceParent]). Whatever later
// acts for the run (a step's publish, the workflow driver after a restart
// or a lease takeover, a continuation step after an approval, a step an
// SDK-driven run puts) starts its span under [RunContext] of that record,
// so every step of the run is a child of the run span, on any coordinator
// and at any time. The run span itself covers the submission only: a span
// cannot be reopened by another process, so the run's later work hangs
// below it rather than inside its duration.

// StartRun starts the "run {kind}" span of a run being submitted, a child
// of ctx's span. The caller ends it when the submission ends.
func StartRun(ctx context.Context, tp trace.TracerProvider, kind string) (context.Context, trace.Span) {
	return Tracer(tp).Start(ctx, "run "+kind,
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(AttrRunKind.String(kind)))
}

// TraceParent returns the W3C traceparent of ctx's span, or "" when ctx
// carries no valid span context.
func TraceParent(ctx context.Context) string {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c.Get("traceparent")
}

// RunContext returns ctx with its span replaced by the run span recorded
// as traceparent (a remote parent), so spans started from it are children
// of the run. ctx's values and deadline stay. An empty or malformed
// traceparent (a run recorded before runs carried one, or with tracing
// off) leaves ctx as it is.
func RunContext(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	rc := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
	sc := trace.SpanContextFromContext(rc)
	if !sc.IsValid() {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// CallerLink links a span started under [RunContext] (run, the context
// it returned) to the span that caused it (caller's: an approval's
// request, a driver's resume), when that is another span than the run's.
func CallerLink(caller, run context.Context) trace.SpanStartOption {
	sc, rsc := trace.SpanContextFromContext(caller), trace.SpanContextFromContext(run)
	// The same span (local in caller, remote in run) is no cause of its own.
	if !sc.IsValid() || sc.TraceID() == rsc.TraceID() && sc.SpanID() == rsc.SpanID() {
		return trace.WithLinks()
	}
	return trace.WithLinks(trace.Link{SpanContext: sc})
}
