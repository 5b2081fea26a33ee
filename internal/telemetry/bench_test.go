package telemetry_test

import (
	"context"
	"encoding/json"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/rath-run/rath/internal/telemetry"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/tool"
)

// discard is a span exporter that drops spans (the SDK still records
// and batches them).
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

type echoTool struct{}

func (echoTool) Def() tool.Def {
	return tool.Def{Name: "echo", Description: "echo", Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (echoTool) ResourceKey(json.RawMessage) string { return "" }
func (echoTool) Call(_ context.Context, _ tool.Env, args json.RawMessage) (any, error) {
	return map[string]json.RawMessage{"args": args}, nil
}

// BenchmarkStepTracing is the instrumentation of one step: an
// invoke_agent span around two model calls (the scripted model) and one
// tool call, as the worker wraps them. "bare" has no wrappers; "noop" is
// tracing off (the default: no OTLP endpoint); "sdk" records every span
// into a batch exporter that discards them.
func BenchmarkStepTracing(b *testing.B) {
	script := []llm.ScriptReply{
		{Content: "calling", ToolCalls: []session.ToolCall{{ID: "c1", Type: "function", Function: session.FunctionCall{Name: "echo", Arguments: `{}`}}}},
		{Content: "done"},
	}
	req := func(n int) llm.Request {
		msgs := []llm.Message{{Role: llm.RoleUser, Content: "hi there"}}
		for range n {
			msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: "calling"})
		}
		return llm.Request{Model: "scripted", Messages: msgs}
	}
	step := func(b *testing.B, tp trace.TracerProvider, wrap bool) {
		var p llm.Provider = &llm.Scripted{Replies: script}
		var t tool.Tool = echoTool{}
		tr := telemetry.Tracer(tp)
		if wrap {
			p = telemetry.TracedProvider(p, tp, nil, "rath.scripted")
			t = telemetry.TracedTool(t, tp, nil)
		}
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			sctx, span := tr.Start(ctx, "invoke_agent bench", trace.WithAttributes(telemetry.AttrGenAIAgentName.String("bench")))
			if wrap {
				span.SetAttributes(telemetry.AttrRunID.String("run_bench"))
			}
			for i := range 2 {
				if _, err := p.Chat(sctx, req(i)); err != nil {
					b.Fatal(err)
				}
				if i == 0 {
					if _, err := t.Call(tool.WithCallID(sctx, "c1"), tool.Env{}, json.RawMessage(`{}`)); err != nil {
						b.Fatal(err)
					}
				}
			}
			span.End()
		}
	}
	b.Run("bare", func(b *testing.B) { step(b, noop.NewTracerProvider(), false) })
	b.Run("noop", func(b *testing.B) { step(b, noop.NewTracerProvider(), true) })
	b.Run("sdk", func(b *testing.B) {
		tp, shutdown, err := telemetry.NewTracerProvider(context.Background(), telemetry.TraceConfig{Exporter: discard{}})
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = shutdown(context.Background()) }()
		step(b, tp, true)
	})
}

// BenchmarkRedact: what a worker logs with every step (its run, step and
// worker, a version id) passed through Redact, and through every pattern
// (all: Redact before its filter).
func BenchmarkRedact(b *testing.B) {
	values := []string{"run_01JDQ5X4Z3N6B7C8D9E0F1G2H3", "run_01JDQ5X4Z3N6B7C8D9E0F1G2H3/0", "w1", "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"}
	for name, redact := range map[string]func(string) string{"filtered": telemetry.Redact, "all": telemetry.RedactAll} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				for _, v := range values {
					redact(v)
				}
			}
		})
	}
}
