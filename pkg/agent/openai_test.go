package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/llm/llmtest"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/tool"
)

func openAIAgent(t *testing.T, srv *llmtest.Server, tools ...tool.Tool) *agent.Agent {
	t.Helper()
	p, err := llm.NewOpenAI(llm.OpenAIConfig{BaseURL: srv.URL(), APIKey: "sk-test", Model: "gpt-test", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	set, err := tool.NewSet(tools...)
	if err != nil {
		t.Fatal(err)
	}
	return &agent.Agent{Spec: agent.Spec{Name: "real", Model: "gpt-test", Instructions: "Use tools."}, Provider: p, Tools: set}
}

// TestStreamedToolCallsThroughTheWire runs the loop against the fake
// OpenAI server: tool calls arrive split across stream chunks, usage in the
// final chunk; text deltas stream out; the tools are sent sorted by name and
// the second request carries the assistant's calls and the tool results.
func TestStreamedToolCallsThroughTheWire(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	srv.Enqueue(
		llmtest.Reply{
			Content: "Looking up both.",
			ToolCalls: []session.ToolCall{
				call("call_a", "zeta", `{"x":"first value"}`),
				call("call_b", "alpha", `{"x":"second value"}`),
			},
			Usage: session.Usage{PromptTokens: 30, CompletionTokens: 12, TotalTokens: 42},
		},
		llmtest.Reply{Content: "Both done.", Usage: session.Usage{PromptTokens: 60, CompletionTokens: 3, TotalTokens: 63}},
	)
	echo := func(name string) *funcTool {
		return &funcTool{name: name, call: func(_ context.Context, args json.RawMessage) (any, error) {
			return map[string]string{name: byArg(args)}, nil
		}}
	}
	a := openAIAgent(t, srv, echo("zeta"), echo("alpha"))
	no := false
	a.Spec.Params.ParallelToolCalls = &no
	a.Spec.Params.ToolChoice = "auto"
	a.Spec.Params.Extra = map[string]any{"user": "tester"}
	var text strings.Builder
	out, err := a.Step(context.Background(), userSession(t, "do both"), agent.Meta{OnDelta: func(d string) { text.WriteString(d) }})
	if err != nil {
		t.Fatal(err)
	}
	if text.String() != "Looking up both.Both done." {
		t.Fatalf("deltas %q", text.String())
	}
	v := out.Version()
	if got := kinds(v.Chunks); got != "assistant,tool_result,tool_result,assistant" {
		t.Fatalf("chunks %s", got)
	}
	calls := v.Chunks[0].ToolCalls()
	if len(calls) != 2 || calls[0].Function.Arguments != `{"x":"first value"}` || calls[1].ID != "call_b" {
		t.Fatalf("accumulated calls %+v", calls)
	}
	rs := results(t, v.Chunks)
	if rs[0]["zeta"] != "first value" || rs[1]["alpha"] != "second value" {
		t.Fatalf("results %v", rs)
	}
	if v.Usage.TotalTokens != 105 || v.Usage.PromptTokens != 90 {
		t.Fatalf("usage %+v", v.Usage)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || !reqs[0].Stream {
		t.Fatalf("%d requests", len(reqs))
	}
	if j := reqs[0].JSON; j["parallel_tool_calls"] != false || j["tool_choice"] != "auto" || j["user"] != "tester" {
		t.Fatalf("params not passed through: %v %v %v", j["parallel_tool_calls"], j["tool_choice"], j["user"])
	}
	if reqs[0].Tools[0].Function.Name != "alpha" || reqs[0].Tools[1].Function.Name != "zeta" {
		t.Fatalf("tools not sorted: %+v", reqs[0].Tools)
	}
	if reqs[0].Messages[0].Role != "system" || *reqs[0].Messages[0].Content != "Use tools." {
		t.Fatalf("instructions %+v", reqs[0].Messages[0])
	}
	m := reqs[1].Messages
	if len(m) != 5 || m[2].Role != "assistant" || len(m[2].ToolCalls) != 2 ||
		m[3].Role != "tool" || m[3].ToolCallID != "call_a" || m[4].ToolCallID != "call_b" {
		t.Fatalf("second request messages %+v", m)
	}
}

// TestBadModelOutput: refusals, content-filter stops and empty replies are
// recorded as notes beside the assistant chunk and the step commits.
func TestBadModelOutput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		reply llmtest.Reply
		event string
		text  string
	}{
		{"refusal", llmtest.Reply{Refusal: "I can't help with that."}, "refusal", "I can't help with that."},
		{"content filter", llmtest.Reply{Content: "partial", FinishReason: "content_filter"}, "content_filter", "partial"},
		{"empty", llmtest.Reply{}, "empty_response", ""},
		{"length", llmtest.Reply{Content: "cut sho", FinishReason: "length"}, "length", "cut sho"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := llmtest.NewServer(t)
			srv.Enqueue(tc.reply)
			out, err := openAIAgent(t, srv).Step(context.Background(), userSession(t, "x"), agent.Meta{})
			if err != nil {
				t.Fatal(err)
			}
			v := out.Version()
			if got := kinds(v.Chunks); got != "assistant,note" {
				t.Fatalf("chunks %s", got)
			}
			if v.Chunks[0].Text() != tc.text {
				t.Fatalf("assistant text %q", v.Chunks[0].Text())
			}
			var note map[string]any
			if err := json.Unmarshal([]byte(v.Chunks[1].Text()), &note); err != nil || note["event"] != tc.event {
				t.Fatalf("note %s (%v)", v.Chunks[1].Text(), err)
			}
		})
	}
}

// TestInvalidArgumentsFromTheWire: arguments the model truncated (finish
// reason length mid-call) are answered with invalid_tool_arguments and the
// model gets another turn.
func TestInvalidArgumentsFromTheWire(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	srv.Enqueue(
		llmtest.Reply{ToolCalls: []session.ToolCall{call("c1", "alpha", `{"x":"unterminated`)}, FinishReason: "length"},
		llmtest.Reply{Content: "I'll stop."},
	)
	ran := false
	a := openAIAgent(t, srv, &funcTool{name: "alpha", call: func(context.Context, json.RawMessage) (any, error) {
		ran = true
		return nil, nil
	}})
	out, err := a.Step(context.Background(), userSession(t, "x"), agent.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	if ran {
		t.Fatal("tool ran on invalid arguments")
	}
	if rs := results(t, out.Version().Chunks); rs[0]["error_kind"] != "invalid_tool_arguments" {
		t.Fatalf("%v", rs)
	}
}
