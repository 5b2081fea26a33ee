package agent_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/tool"
)

// instantModel answers at once: a no-op tool call until the request holds
// rounds assistant messages, then a short text.
type instantModel struct{ rounds int }

func (m instantModel) Chat(_ context.Context, req llm.Request) (llm.Response, error) {
	n := 0
	for _, msg := range req.Messages {
		if msg.Role == llm.RoleAssistant {
			n++
		}
	}
	u := session.Usage{PromptTokens: 10, CompletionTokens: 2, TotalTokens: 12}
	if n < m.rounds {
		return llm.Response{ToolCalls: []session.ToolCall{{ID: "c", Type: "function",
			Function: session.FunctionCall{Name: "noop", Arguments: `{"x":"a"}`}}}, Usage: u, FinishReason: llm.FinishToolCalls}, nil
	}
	return llm.Response{Content: "done", Usage: u, FinishReason: llm.FinishStop}, nil
}

// BenchmarkLoopRound measures the loop's own overhead per tool round: an
// instant model, one no-op tool call per round (argument parsing, schema
// validation, dispatch, result encoding, chunk building), no commit. Each
// op is one step of `rounds` tool rounds plus the final model call.
func BenchmarkLoopRound(b *testing.B) {
	for _, rounds := range []int{1, 10} {
		b.Run(map[int]string{1: "rounds=1", 10: "rounds=10"}[rounds], func(b *testing.B) {
			noop := &funcTool{name: "noop", call: func(context.Context, json.RawMessage) (any, error) { return true, nil }}
			set, err := tool.NewSet(noop)
			if err != nil {
				b.Fatal(err)
			}
			a := &agent.Agent{Spec: agent.Spec{Name: "bench", Model: "instant", Instructions: "Be quick."},
				Provider: instantModel{rounds: rounds}, Tools: set}
			s, err := session.FromUserMessage(context.Background(), session.NewMemoryGraph(), "go")
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				res, err := a.Run(context.Background(), s, agent.Meta{})
				if err != nil || len(res.Rounds) != rounds+1 {
					b.Fatalf("%v %d", err, len(res.Rounds))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rounds), "ns/round")
		})
	}
}

// BenchmarkStepCommit is one tool round plus the commit of its version to
// the in-memory graph.
func BenchmarkStepCommit(b *testing.B) {
	noop := &funcTool{name: "noop", call: func(context.Context, json.RawMessage) (any, error) { return true, nil }}
	set, err := tool.NewSet(noop)
	if err != nil {
		b.Fatal(err)
	}
	a := &agent.Agent{Spec: agent.Spec{Name: "bench", Model: "instant"}, Provider: instantModel{rounds: 1}, Tools: set}
	s, err := session.FromUserMessage(context.Background(), session.NewMemoryGraph(), "go")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Step(context.Background(), s, agent.Meta{}); err != nil {
			b.Fatal(err)
		}
	}
}
