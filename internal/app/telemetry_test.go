package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/telemetry"
	"github.com/rath-run/rath/internal/telemetry/telemetrytest"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/session"
)

// tracedToolSpec calls one tool, then answers.
const tracedToolSpec = `{
  "name": "scribe", "model": "scripted", "tools": ["builtin"],
  "script": [
    {"content": "Writing.", "tool_calls": [{"id": "call_w1", "function": {"name": "write_workspace_file", "arguments": {"path": "plan.md", "content": "Day 1"}}}]},
    {"content": "Saved."}
  ]
}`

const tracedReviewSpec = `{"name":"reviewer","model":"scripted","script":[{"content":"unused"},{"content":"unused"},{"content":"Looks good."}]}`

// TestTraceAcrossNATS runs two steps (an agent with a tool call, then a
// second agent on its output) under one client span and checks the trace
// an OTLP receiver gets: client → API → publish → (NATS) → process →
// invoke_agent → chat / execute_tool, with GenAI attributes and Rath ids,
// and the trace id on the committed versions.
func TestTraceAcrossNATS(t *testing.T) {
	t.Parallel()
	recv := telemetrytest.NewReceiver(t)
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": recv.URL}
	ctx := context.Background()
	tp, shutdown, err := telemetry.NewTracerProvider(ctx, telemetry.TraceConfig{ServiceName: "rath-dev", Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	s := startDev(t, "", app.DevConfig{Workers: 1, TracerProvider: tp})

	// The client side, as rathctl does it: a root span and the otelhttp
	// transport.
	ctx, root := telemetry.Tracer(tp).Start(ctx, "rathctl run")
	hc := &http.Client{Transport: otelhttp.NewTransport(http.DefaultTransport,
		otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(telemetry.Propagator()))}
	submit := func(body map[string]any) runs.Run {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.dev.URL+"/v1/runs", bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r runs.Run
		if resp.StatusCode != http.StatusCreated || json.NewDecoder(resp.Body).Decode(&r) != nil {
			t.Fatalf("submit: %s", resp.Status)
		}
		return r
	}
	r1 := s.waitRun(t, submit(map[string]any{"agent": json.RawMessage(tracedToolSpec), "message": "Keep my plan."}).ID)
	if r1.Status != runs.RunSucceeded {
		t.Fatalf("run 1 ended %s: %s", r1.Status, r1.Error)
	}
	r2 := s.waitRun(t, submit(map[string]any{"agent": json.RawMessage(tracedReviewSpec), "session": r1.Output.String()}).ID)
	if r2.Status != runs.RunSucceeded {
		t.Fatalf("run 2 ended %s: %s", r2.Status, r2.Error)
	}
	root.End()
	traceID := root.SpanContext().TraceID().String()
	// Workers end their spans after acking; wait for both steps' spans.
	testenv.Eventually(t, 10*time.Second, "both steps' spans to end", func() bool {
		n := 0
		for _, sp := range recvSpansAfterFlush(t, tp, recv) {
			if strings.HasPrefix(sp.Name, "process ") {
				n++
			}
		}
		return n == 2
	})
	if err := shutdown(context.Background()); err != nil {
		t.Fatalf("shutdown tracer provider: %v", err)
	}
	if errs := recv.Errs(); len(errs) > 0 {
		t.Fatalf("receiver: %v", errs)
	}

	spans := map[string]telemetrytest.Span{}
	var all []telemetrytest.Span
	for _, sp := range recv.Spans() {
		if sp.TraceID != traceID {
			// The test's own polling (GET /v1/runs/{id}) is untraced
			// client-side, so its server spans start their own traces.
			if sp.Name != "GET /v1/runs/{id}" {
				t.Errorf("span %q has trace %s, want the client's %s", sp.Name, sp.TraceID, traceID)
			}
			continue
		}
		spans[sp.SpanID] = sp
		all = append(all, sp)
	}
	// parentChain names the span's ancestors up to the root.
	parentChain := func(sp telemetrytest.Span) []string {
		var names []string
		for sp.ParentID != "" {
			p, ok := spans[sp.ParentID]
			if !ok {
				t.Fatalf("span %q: parent %s not received", sp.Name, sp.ParentID)
			}
			names = append(names, p.Name)
			sp = p
		}
		return names
	}
	find := func(pred func(telemetrytest.Span) bool) []telemetrytest.Span {
		var out []telemetrytest.Span
		for _, sp := range all {
			if pred(sp) {
				out = append(out, sp)
			}
		}
		return out
	}
	for i, r := range []runs.Run{r1, r2} {
		steps := find(func(sp telemetrytest.Span) bool {
			return strings.HasPrefix(sp.Name, "process ") && sp.Attrs["rath.run.id"] == r.ID
		})
		if len(steps) != 1 {
			t.Fatalf("run %d: %d process spans, want 1", i+1, len(steps))
		}
		step := steps[0]
		if step.Kind != "SPAN_KIND_CONSUMER" || step.Attrs["rath.step.id"] == "" {
			t.Errorf("step span %+v", step)
		}
		// Across the NATS hop: process ← publish ← the run's span ← API
		// server span ← HTTP client span ← root.
		chain := parentChain(step)
		if len(chain) != 5 || chain[0] != "publish rath.jobs.default" || chain[1] != "run agent" || chain[4] != "rathctl run" {
			t.Errorf("run %d: step span ancestry %q, want publish → run agent → server → client → rathctl run", i+1, chain)
		}
		if p := spans[step.ParentID]; p.Kind != "SPAN_KIND_PRODUCER" || p.Service != "rath-dev" {
			t.Errorf("publish span %+v", p)
		}
		runSpan := spans[spans[step.ParentID].ParentID]
		// Both runs are one conversation: the second continues the first's
		// output, whose root is the first run's new session.
		if runSpan.Attrs["rath.run.id"] != r.ID || runSpan.Attrs["gen_ai.conversation.id"] != r1.Input.String() {
			t.Errorf("run span %+v, want rath.run.id %s and gen_ai.conversation.id %s (the session's root)", runSpan, r.ID, r1.Input)
		}
		if srv := spans[runSpan.ParentID]; srv.Kind != "SPAN_KIND_SERVER" {
			t.Errorf("API span %+v, want a server span", srv)
		}
		agents := find(func(sp telemetrytest.Span) bool {
			return sp.ParentID == step.SpanID && sp.Attrs["gen_ai.operation.name"] == "invoke_agent"
		})
		if len(agents) != 1 {
			t.Fatalf("run %d: invoke_agent children of the step span %+v, want one", i+1, agents)
		}
		ag := agents[0]
		if commits := find(func(sp telemetrytest.Span) bool {
			return sp.Name == "store commit" && sp.Attrs["rath.step.id"] == step.Attrs["rath.step.id"]
		}); len(commits) != 1 {
			t.Errorf("run %d: %d store commit spans for the step, want 1", i+1, len(commits))
		}
		out, err := session.Open(ctx, s.dev.Backend.Store, *r.Output)
		if err != nil {
			t.Fatal(err)
		}
		if got := out.Version().Producer.TraceID; got != traceID {
			t.Errorf("run %d: version producer.trace_id = %q, want %s", i+1, got, traceID)
		}
		for k, want := range map[string]string{
			"rath.run.id": r.ID, "rath.step.id": step.Attrs["rath.step.id"], "rath.session.version": r.Output.String(),
			"gen_ai.request.model": "scripted", "gen_ai.conversation.id": r1.Input.String(),
		} {
			if ag.Attrs[k] != want {
				t.Errorf("run %d: invoke_agent %s = %q, want %q", i+1, k, ag.Attrs[k], want)
			}
		}
		chats := find(func(sp telemetrytest.Span) bool {
			return sp.ParentID == ag.SpanID && sp.Attrs["gen_ai.operation.name"] == "chat"
		})
		tools := find(func(sp telemetrytest.Span) bool {
			return sp.ParentID == ag.SpanID && sp.Attrs["gen_ai.operation.name"] == "execute_tool"
		})
		wantChats, wantTools := 2, 1
		if i == 1 {
			wantChats, wantTools = 1, 0
		}
		if len(chats) != wantChats || len(tools) != wantTools {
			t.Fatalf("run %d: %d chat and %d execute_tool spans under invoke_agent, want %d and %d", i+1, len(chats), len(tools), wantChats, wantTools)
		}
		for _, c := range chats {
			if c.Name != "chat scripted" || c.Kind != "SPAN_KIND_CLIENT" || c.Attrs["gen_ai.request.model"] != "scripted" ||
				c.Attrs["gen_ai.usage.input_tokens"] == "" || c.Attrs["gen_ai.usage.input_tokens"] == "0" || c.Attrs["gen_ai.usage.output_tokens"] == "0" {
				t.Errorf("chat span %+v", c)
			}
		}
		if i == 0 {
			tl := tools[0]
			if tl.Name != "execute_tool write_workspace_file" || tl.Attrs["gen_ai.tool.name"] != "write_workspace_file" || tl.Attrs["gen_ai.tool.call.id"] != "call_w1" {
				t.Errorf("tool span %+v", tl)
			}
		}
		if i == 0 && ag.Attrs["gen_ai.agent.name"] != "scribe" || i == 1 && ag.Attrs["gen_ai.agent.name"] != "reviewer" {
			t.Errorf("run %d: gen_ai.agent.name = %q", i+1, ag.Attrs["gen_ai.agent.name"])
		}
	}
}

// recvSpansAfterFlush flushes tp's batch and returns what recv has.
func recvSpansAfterFlush(t *testing.T, tp interface{}, recv *telemetrytest.Receiver) []telemetrytest.Span {
	t.Helper()
	if f, ok := tp.(interface{ ForceFlush(context.Context) error }); ok {
		if err := f.ForceFlush(context.Background()); err != nil {
			t.Fatalf("flush: %v", err)
		}
	}
	return recv.Spans()
}
