package replay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/tool"
)

// recordedStep records a step that called a tool, as a worker would have.
func recordedStep(t *testing.T) (session.Graph, agent.Spec, session.Session) {
	t.Helper()
	ctx := context.Background()
	g := session.NewMemoryGraph()
	in, err := session.New(ctx, g, session.User("how many?"))
	if err != nil {
		t.Fatal(err)
	}
	call := session.ToolCall{ID: "call_0_0", Type: "function", Function: session.FunctionCall{Name: "lookup", Arguments: `{"q":"count"}`}}
	out, err := in.Extend(ctx, session.Extension{Op: session.OpStep, Key: "run-x/00",
		Chunks: []session.Chunk{
			session.Assistant("", call),
			session.ToolResultChunk(session.ToolResult{ToolCallID: "call_0_0", Name: "lookup", Content: `{"count":3}`}),
			session.Assistant("three"),
		},
		Usage:    session.Usage{PromptTokens: 10, CompletionTokens: 4, TotalTokens: 14},
		Producer: session.Producer{Run: "run-x", Step: "run-x/00", Agent: "counter", Model: "scripted", Worker: "w1"}})
	if err != nil {
		t.Fatal(err)
	}
	return g, agent.Spec{Name: "counter", Model: "scripted", Tools: []string{"lookup"}}, out
}

func TestReplayReproducesHashes(t *testing.T) {
	ctx := context.Background()
	g, spec, out := recordedStep(t)
	rep, err := Step(ctx, g, spec, out, nil, Options{Strict: true, Worker: "test"})
	if err != nil {
		t.Fatalf("strict replay: %v (%+v)", err, rep)
	}
	if !rep.Identical || rep.Chunks != 3 || rep.Replay == nil {
		t.Fatalf("replay = %+v", rep)
	}
	r, err := session.Open(ctx, g, *rep.Replay)
	if err != nil {
		t.Fatal(err)
	}
	v := r.Version()
	if v.Op != session.OpReplay || len(v.Parents) != 1 || v.Parents[0] != *out.Version().Base || v.Producer.Agent != "counter" {
		t.Errorf("replay version = %+v", v)
	}
	want, _ := out.Chunks(ctx)
	got, _ := r.Chunks(ctx)
	if len(got) != len(want) {
		t.Fatalf("replayed transcript has %d chunks, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Hash() != want[i].Hash() {
			t.Errorf("chunk %d: hash %s, recorded %s", i, got[i].Hash(), want[i].Hash())
		}
	}
}

func TestStrictReplayFailsOnEditedRecording(t *testing.T) {
	ctx := context.Background()
	g, spec, out := recordedStep(t)
	edited := append([]session.Chunk(nil), out.Version().Chunks...)
	edited[2] = session.Assistant("four")
	rep, err := Step(ctx, g, spec, out, edited, Options{Strict: true, Worker: "test"})
	if !errors.Is(err, ErrDiverged) || rep.Replay != nil {
		t.Fatalf("strict replay of an edited recording: %v, %+v; want a divergence and no commit", err, rep)
	}
	if !strings.Contains(err.Error(), "chunk 3 (assistant)") {
		t.Errorf("divergence does not name the chunk: %v", err)
	}
	// Lenient: committed, with the divergence reported.
	rep, err = Step(ctx, g, spec, out, edited, Options{Worker: "test"})
	if err != nil || rep.Identical || rep.Replay == nil || len(rep.Divergences) != 1 {
		t.Errorf("lenient replay of an edited recording: %v %+v", err, rep)
	}
	// An edited tool result makes the second model call differ from the
	// recording: strict replay stops there.
	edited = append([]session.Chunk(nil), out.Version().Chunks...)
	edited[1] = session.ToolResultChunk(session.ToolResult{ToolCallID: "call_0_0", Name: "lookup", Content: `{"count":4}`})
	if _, err := Step(ctx, g, spec, out, edited, Options{Strict: true, Worker: "test"}); !errors.Is(err, ErrDiverged) {
		t.Errorf("strict replay with an edited tool result: %v, want a divergence", err)
	}
}

// TestReplayOfABudgetStop: a step the run's budget stopped after its third
// round (its tool calls left unrun) replays strictly, stopping at the same
// round: the replay reads the budget back from the stop's note. Before,
// the replay ran with no budget and asked the recording for a fourth reply.
func TestReplayOfABudgetStop(t *testing.T) {
	ctx := context.Background()
	g := session.NewMemoryGraph()
	in, err := session.New(ctx, g, session.User("count"))
	if err != nil {
		t.Fatal(err)
	}
	spec := agent.Spec{Name: "counter", Model: "scripted", Tools: []string{"lookup"}}
	results := map[string]string{}
	for i := range 6 {
		id := fmt.Sprintf("call_%d", i)
		results[id] = fmt.Sprintf(`{"n":%d}`, i)
		spec.Script = append(spec.Script, llm.ScriptReply{Content: "looking", ToolCalls: []session.ToolCall{
			{ID: id, Type: "function", Function: session.FunctionCall{Name: "lookup", Arguments: `{}`}}}})
	}
	spec.Script = append(spec.Script, llm.ScriptReply{Content: "done"})
	run := func(budget agent.Budget) (agent.Result, agent.Meta) {
		t.Helper()
		tools, err := tool.NewSet(recordedTool{name: "lookup", results: results})
		if err != nil {
			t.Fatal(err)
		}
		meta := agent.Meta{Key: "run-b/00", Producer: session.Producer{Run: "run-b", Step: "run-b/00", Agent: "counter", Model: llm.ScriptedModel}, Run: budget}
		a := &agent.Agent{Spec: spec, Provider: &llm.Scripted{Replies: spec.Script}, Model: llm.ScriptedModel, Tools: tools}
		res, err := a.Run(ctx, in, meta)
		if err != nil {
			t.Fatal(err)
		}
		return res, meta
	}
	free, _ := run(agent.Budget{})
	if len(free.Rounds) < 4 {
		t.Fatalf("the unbudgeted step made %d rounds", len(free.Rounds))
	}
	used := int64(7)
	limit := used + free.Rounds[0].TotalTokens + free.Rounds[1].TotalTokens + 1
	res, meta := run(agent.Budget{MaxTokens: limit, UsedTokens: used})
	if res.Stop != agent.StopRunTokens || len(res.Rounds) != 3 {
		t.Fatalf("budgeted step: stop %q after %d rounds, want run_tokens after 3", res.Stop, len(res.Rounds))
	}
	out, err := in.Extend(ctx, res.Extension(meta))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Step(ctx, g, spec, out, nil, Options{Strict: true, Worker: "test"})
	if err != nil || !rep.Identical {
		t.Fatalf("strict replay of a budget stop: %v, %+v", err, rep)
	}
}
