package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/tool"
)

// replayLookup is a tool whose answer the test controls.
type replayLookup struct{ answer string }

func (l *replayLookup) Def() tool.Def {
	return tool.Def{Name: "lookup", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}
}
func (l *replayLookup) ResourceKey(json.RawMessage) string { return "lookup" }
func (l *replayLookup) Call(_ context.Context, _ tool.Env, args json.RawMessage) (any, error) {
	return map[string]any{"q": args, "answer": l.answer}, nil
}

// TestReplayThroughTheLoop records a step with the scripted model and the
// real loop, then re-runs it with llm.ReplayVersion: the same chunks and
// usage in strict mode; a changed tool result fails strictly, naming the
// round, and passes leniently.
func TestReplayThroughTheLoop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	replies := []llm.ScriptReply{
		{Content: "Looking.", ToolCalls: []session.ToolCall{{Function: session.FunctionCall{Name: "lookup", Arguments: `{"q":"kyoto"}`}}}},
		{ToolCalls: []session.ToolCall{
			{Function: session.FunctionCall{Name: "lookup", Arguments: `{"q":"nara"}`}},
			{Function: session.FunctionCall{Name: "lookup", Arguments: `{"q":"osaka"}`}},
		}},
		{Content: "Three days planned."},
	}
	spec := agent.Spec{Name: "planner", Model: "scripted", Instructions: "Be brief."}
	withTool := func(p llm.Provider, answer string) *agent.Agent {
		set, err := tool.NewSet(&replayLookup{answer: answer})
		if err != nil {
			t.Fatal(err)
		}
		return &agent.Agent{Spec: spec, Provider: p, Tools: set}
	}
	in, err := session.FromUserMessage(ctx, session.NewMemoryGraph(), "Plan three days.")
	if err != nil {
		t.Fatal(err)
	}
	out, err := withTool(&llm.Scripted{Replies: replies}, "open").Step(ctx, in, agent.Meta{})
	if err != nil {
		t.Fatal(err)
	}

	r, err := llm.ReplayVersion(ctx, out, llm.ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := withTool(r, "open").Run(ctx, in, agent.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(res.Chunks, out.Version().Chunks, session.Chunk.Equal) {
		t.Fatalf("replayed chunks\n%v\nrecorded\n%v", res.Chunks, out.Version().Chunks)
	}
	if res.Usage != out.Usage() || len(res.Rounds) != 3 || res.Model != llm.ScriptedModel {
		t.Fatalf("replayed usage %+v (%d rounds, model %s), recorded %+v", res.Usage, len(res.Rounds), res.Model, out.Usage())
	}
	if err := r.Verify(); err != nil {
		t.Fatal(err)
	}

	strict, _ := llm.ReplayVersion(ctx, out, llm.ReplayOptions{})
	_, err = withTool(strict, "closed").Run(ctx, in, agent.Meta{})
	if !errors.Is(err, llm.ErrReplayDiverged) || !strings.Contains(err.Error(), "round 2:") ||
		!strings.Contains(err.Error(), "tool result for call_0_0 content") {
		t.Fatalf("strict replay with another tool result: %v", err)
	}
	lenient, _ := llm.ReplayVersion(ctx, out, llm.ReplayOptions{Lenient: true})
	res, err = withTool(lenient, "closed").Run(ctx, in, agent.Meta{})
	if err != nil || len(res.Rounds) != 3 || res.Chunks[len(res.Chunks)-1].Text() != "Three days planned." {
		t.Fatalf("lenient replay: %v, %+v", err, res)
	}
}
