package cli

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/session"
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
	rep, err := replayStep(ctx, g, spec, out, nil, true)
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
	rep, err := replayStep(ctx, g, spec, out, edited, true)
	if !errors.Is(err, errReplayDiverged) || rep.Replay != nil {
		t.Fatalf("strict replay of an edited recording: %v, %+v; want a divergence and no commit", err, rep)
	}
	if !strings.Contains(err.Error(), "chunk 3 (assistant)") {
		t.Errorf("divergence does not name the chunk: %v", err)
	}
	// Lenient: committed, with the divergence reported.
	rep, err = replayStep(ctx, g, spec, out, edited, false)
	if err != nil || rep.Identical || rep.Replay == nil || len(rep.Divergences) != 1 {
		t.Errorf("lenient replay of an edited recording: %v %+v", err, rep)
	}
	// An edited tool result makes the second model call differ from the
	// recording: strict replay stops there.
	edited = append([]session.Chunk(nil), out.Version().Chunks...)
	edited[1] = session.ToolResultChunk(session.ToolResult{ToolCallID: "call_0_0", Name: "lookup", Content: `{"count":4}`})
	if _, err := replayStep(ctx, g, spec, out, edited, true); !errors.Is(err, errReplayDiverged) {
		t.Errorf("strict replay with an edited tool result: %v, want a divergence", err)
	}
}

func TestReplayCommand(t *testing.T) {
	t.Parallel()
	storeFlag, _, run := scriptedRun(t)
	var rep replayReport
	okJSON(t, &rep, with(storeFlag, "replay", run.Output.String(), "--strict")...)
	if !rep.Identical || rep.Replay == nil || rep.Chunks != 1 {
		t.Fatalf("replay --strict = %+v", rep)
	}
	var g struct {
		Nodes []struct {
			Op string `json:"op"`
		} `json:"nodes"`
	}
	code, body, _ := rathctl(t, "", with(storeFlag, "graph", run.Input.String(), "--format", "json")...)
	if err := json.Unmarshal([]byte(body), &g); code != 0 || err != nil || len(g.Nodes) != 3 || g.Nodes[2].Op != "replay" {
		t.Errorf("graph after replay: exit %d %v %+v", code, err, g)
	}
	if code, _, errOut := rathctl(t, "", with(storeFlag, "replay", run.Input.String())...); code != 1 || !strings.Contains(errOut, "not by an agent step") {
		t.Errorf("replay of the input: exit %d %s", code, errOut)
	}
}
