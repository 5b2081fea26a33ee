package telemetry_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/rath-run/rath/internal/telemetry"
)

// TestRunContextRoundTrip: a span started under the recorded traceparent,
// in another context (another process, after a restart), is a child of the
// run span, in the run's trace.
func TestRunContextRoundTrip(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	ctx, api := tp.Tracer("t").Start(context.Background(), "POST /v1/runs")
	rctx, run := telemetry.StartRun(ctx, tp, "workflow")
	tpHeader := telemetry.TraceParent(rctx)
	run.End()
	api.End()
	if tpHeader == "" {
		t.Fatal("TraceParent of a recording span is empty")
	}

	later, other := tp.Tracer("t").Start(context.Background(), "approval request")
	runCtx := telemetry.RunContext(later, tpHeader)
	_, step := tp.Tracer("t").Start(runCtx, "publish", telemetry.CallerLink(later, runCtx))
	step.End()
	other.End()

	// The run's own context (the submit publishing its first step) links
	// nothing: the run span is the parent already.
	_, first := tp.Tracer("t").Start(telemetry.RunContext(rctx, tpHeader), "first publish",
		telemetry.CallerLink(rctx, telemetry.RunContext(rctx, tpHeader)))
	first.End()

	spans := exp.GetSpans()
	byName := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	runSpan, pub := byName["run workflow"], byName["publish"]
	if runSpan.Parent.SpanID() != byName["POST /v1/runs"].SpanContext.SpanID() {
		t.Errorf("run span's parent = %s, want the API span", runSpan.Parent.SpanID())
	}
	if pub.Parent.SpanID() != runSpan.SpanContext.SpanID() || pub.SpanContext.TraceID() != runSpan.SpanContext.TraceID() {
		t.Errorf("publish span: parent %s trace %s, want run span %s trace %s",
			pub.Parent.SpanID(), pub.SpanContext.TraceID(), runSpan.SpanContext.SpanID(), runSpan.SpanContext.TraceID())
	}
	if l := byName["first publish"].Links; len(l) != 0 {
		t.Errorf("the submit's own publish links %v, want nothing", l)
	}
	if len(pub.Links) != 1 || pub.Links[0].SpanContext.SpanID() != byName["approval request"].SpanContext.SpanID() {
		t.Errorf("publish span links = %v, want the approval request", pub.Links)
	}
}

func TestRunContextBadInput(t *testing.T) {
	ctx := context.Background()
	for _, in := range []string{"", "garbage", "00-00000000000000000000000000000000-0000000000000000-01", "ff-zz"} {
		if got := trace.SpanContextFromContext(telemetry.RunContext(ctx, in)); got.IsValid() {
			t.Errorf("RunContext(%q) gave a valid span context %v", in, got)
		}
	}
	if got := telemetry.TraceParent(ctx); got != "" {
		t.Errorf("TraceParent of an empty context = %q", got)
	}
}

func FuzzRunContext(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		ctx := telemetry.RunContext(context.Background(), s)
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() && telemetry.TraceParent(ctx) == "" {
			t.Fatalf("valid span context from %q has no traceparent", s)
		}
	})
}
