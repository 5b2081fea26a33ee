package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
)

// loop is a minimal agent loop, enough to record and replay a step: it
// sends instructions plus the transcript, records each reply and answers
// every tool call with toolFn's result, for at most maxRounds model calls.
func loop(ctx context.Context, p llm.Provider, instructions string, in []session.Chunk, maxRounds int,
	toolFn func(session.ToolCall) string,
) ([]session.Chunk, []session.Usage, error) {
	msgs := llm.MessagesFromChunks(in)
	if instructions != "" {
		msgs = append([]llm.Message{{Role: llm.RoleSystem, Content: instructions}}, msgs...)
	}
	var out []session.Chunk
	var usage []session.Usage
	add := func(c session.Chunk) {
		out = append(out, c)
		msgs = append(msgs, llm.MessagesFromChunks([]session.Chunk{c})...)
	}
	for range maxRounds {
		resp, err := p.Chat(ctx, llm.Request{Messages: slices.Clone(msgs)})
		if err != nil {
			return out, usage, err
		}
		usage = append(usage, resp.Usage)
		add(resp.Chunk())
		if len(resp.ToolCalls) == 0 {
			break
		}
		for _, c := range resp.ToolCalls {
			add(session.ToolResultChunk(session.ToolResult{ToolCallID: c.ID, Name: c.Function.Name, Content: toolFn(c)}))
		}
	}
	return out, usage, nil
}

// script asks for one tool call, then two, then answers.
var script = []llm.ScriptReply{
	{Content: "Looking.", ToolCalls: []session.ToolCall{{Function: session.FunctionCall{Name: "lookup", Arguments: `{"q":"kyoto"}`}}}},
	{ToolCalls: []session.ToolCall{
		{Function: session.FunctionCall{Name: "lookup", Arguments: `{"q":"nara"}`}},
		{Function: session.FunctionCall{Name: "lookup", Arguments: `{"q":"osaka"}`}},
	}},
	{Content: "Day 1 Kyoto, day 2 Nara, day 3 Osaka."},
}

func echoTool(c session.ToolCall) string { return fmt.Sprintf(`{"found":%s}`, c.Function.Arguments) }

var input = []session.Chunk{session.System("You plan trips."), session.User("Plan three days.")}

// record runs the scripted model to produce the original step.
func record(t *testing.T) ([]session.Chunk, []session.Usage) {
	t.Helper()
	chunks, usage, err := loop(context.Background(), &llm.Scripted{Replies: script}, "be brief", input, 10, echoTool)
	if err != nil {
		t.Fatal(err)
	}
	if len(usage) != 3 {
		t.Fatalf("recorded %d rounds", len(usage))
	}
	return chunks, usage
}

func TestReplayReproducesStep(t *testing.T) {
	t.Parallel()
	orig, usage := record(t)
	r, err := llm.NewReplay(input, orig, llm.ReplayOptions{RoundUsage: usage, Model: "gpt-x"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Rounds() != 3 {
		t.Fatalf("rounds = %d", r.Rounds())
	}
	var got []session.Usage
	p := providerFunc(func(ctx context.Context, req llm.Request) (llm.Response, error) {
		resp, err := r.Chat(ctx, req)
		if err == nil && resp.Model != "gpt-x" {
			t.Errorf("model = %q", resp.Model)
		}
		return resp, err
	})
	again, got, err := loop(context.Background(), p, "be brief", input, 10, echoTool)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(again, orig, session.Chunk.Equal) {
		t.Fatalf("replayed chunks differ:\n%v\n%v", again, orig)
	}
	if !slices.Equal(got, usage) {
		t.Fatalf("usage %v, recorded %v", got, usage)
	}
	if err := r.Verify(); err != nil || r.Calls() != 3 {
		t.Fatalf("verify = %v after %d calls", err, r.Calls())
	}
	// Different instructions are not recorded, so not compared.
	r2, _ := llm.NewReplay(input, orig, llm.ReplayOptions{})
	if _, _, err := loop(context.Background(), r2, "be verbose", input, 10, echoTool); err != nil {
		t.Fatalf("other instructions: %v", err)
	}
}

func TestReplayStrictDivergence(t *testing.T) {
	t.Parallel()
	orig, _ := record(t)
	for _, tc := range []struct {
		name   string
		in     []session.Chunk
		tool   func(session.ToolCall) string
		rounds int
		want   []string
	}{
		{
			name: "tool result", in: input, rounds: 10,
			tool: func(session.ToolCall) string { return `{"found":"elsewhere"}` },
			want: []string{"round 2:", "transcript message 3 (of 4)", "tool result for call_0_0 content",
				`got "{\"found\":\"elsewhere\"}"`, `recorded "{\"found\":{\"q\":\"kyoto\"}}"`},
		},
		{
			name: "input", in: []session.Chunk{session.System("You plan trips."), session.User("Plan four days.")}, rounds: 10, tool: echoTool,
			want: []string{"round 1:", "transcript message 1 (of 2)", "user message content", `got "Plan four days."`, `recorded "Plan three days."`},
		},
		{
			name: "longer input", in: append(slices.Clone(input), session.User("And Kobe.")), rounds: 10, tool: echoTool,
			want: []string{"round 1:", "the request sends 3 transcript messages, the recording had 2", "extra message 2: user message"},
		},
		{
			name: "shorter input", in: input[1:], rounds: 10, tool: echoTool,
			want: []string{"round 1:", "transcript message 0 (of 2)", `got "be brief", recorded "You plan trips."`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := llm.NewReplay(input, orig, llm.ReplayOptions{})
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = loop(context.Background(), r, "be brief", tc.in, tc.rounds, tc.tool)
			if !errors.Is(err, llm.ErrReplayDiverged) || !errors.Is(err, llm.ErrPermanent) || errors.Is(err, llm.ErrTransient) {
				t.Fatalf("err = %v, want ErrReplayDiverged (permanent)", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			// Lenient mode answers in order whatever was sent.
			lr, _ := llm.NewReplay(input, orig, llm.ReplayOptions{Lenient: true})
			chunks, _, err := loop(context.Background(), lr, "be brief", tc.in, tc.rounds, tc.tool)
			if err != nil || lr.Calls() != 3 || lr.Verify() != nil {
				t.Fatalf("lenient: %v after %d calls", err, lr.Calls())
			}
			if !chunks[len(chunks)-1].Equal(orig[len(orig)-1]) {
				t.Fatalf("lenient final reply %v", chunks[len(chunks)-1])
			}
		})
	}
}

func TestReplayCallCounts(t *testing.T) {
	t.Parallel()
	orig, _ := record(t)
	// More calls than recorded: the recording stops after round 2's results.
	for _, lenient := range []bool{false, true} {
		r, err := llm.NewReplay(input, orig[:len(orig)-1], llm.ReplayOptions{Lenient: lenient})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = loop(context.Background(), r, "", input, 10, echoTool)
		if !errors.Is(err, llm.ErrReplayDiverged) ||
			!strings.Contains(err.Error(), "round 3: the step asked the model again, but the recording has only 2 replies") {
			t.Fatalf("lenient=%v: err = %v", lenient, err)
		}
	}
	// Fewer calls: the replayed step stops after one round.
	r, _ := llm.NewReplay(input, orig, llm.ReplayOptions{})
	if _, _, err := loop(context.Background(), r, "", input, 1, echoTool); err != nil {
		t.Fatal(err)
	}
	err := r.Verify()
	if !errors.Is(err, llm.ErrReplayDiverged) ||
		!strings.Contains(err.Error(), "the step made 1 model calls and stopped; the recording has 3 (round 2 was never asked for)") {
		t.Fatalf("verify = %v", err)
	}
	lr, _ := llm.NewReplay(input, orig, llm.ReplayOptions{Lenient: true})
	if _, _, err := loop(context.Background(), lr, "", input, 1, echoTool); err != nil || lr.Verify() != nil {
		t.Fatalf("lenient fewer calls: %v, %v", err, lr.Verify())
	}
}

func TestReplayVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := session.NewMemoryGraph()
	in, err := session.New(ctx, g, input...)
	if err != nil {
		t.Fatal(err)
	}
	orig, usage := record(t)
	raw, _ := json.Marshal(usage)
	var total session.Usage
	for _, u := range usage {
		total = total.Add(u)
	}
	out, err := in.Extend(ctx, session.Extension{
		Op: session.OpStep, Chunks: orig, Usage: total,
		Producer: session.Producer{Agent: "planner", Model: "gpt-x"},
		Extras:   []session.Extra{{Key: "loop.round_usage", Value: raw}},
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := llm.ReplayVersion(ctx, out, llm.ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var models []string
	p := providerFunc(func(ctx context.Context, req llm.Request) (llm.Response, error) {
		resp, err := r.Chat(ctx, req)
		models = append(models, resp.Model)
		return resp, err
	})
	again, got, err := loop(ctx, p, "be brief", input, 10, echoTool)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(again, orig, session.Chunk.Equal) || !slices.Equal(got, usage) || models[0] != "gpt-x" {
		t.Fatalf("replay of the version: %v %v %v", again, got, models)
	}
	// Only step versions replay, and only ones with a model reply.
	if _, err := llm.ReplayVersion(ctx, in, llm.ReplayOptions{}); err == nil || !strings.Contains(err.Error(), "not by a step") {
		t.Fatalf("replay of a create: %v", err)
	}
	noReply, err := in.Extend(ctx, session.Extension{Op: session.OpStep, Chunks: []session.Chunk{session.User("hm")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := llm.ReplayVersion(ctx, noReply, llm.ReplayOptions{}); err == nil || !strings.Contains(err.Error(), "no model reply") {
		t.Fatalf("replay without replies: %v", err)
	}
	bad, err := in.Extend(ctx, session.Extension{Op: session.OpStep, Chunks: orig,
		Extras: []session.Extra{{Key: "loop.round_usage", Value: json.RawMessage(`{"not":"a list"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := llm.ReplayVersion(ctx, bad, llm.ReplayOptions{}); err == nil || !strings.Contains(err.Error(), "loop.round_usage") {
		t.Fatalf("replay with a bad extra: %v", err)
	}
}

func TestReplayNotesAndStreaming(t *testing.T) {
	t.Parallel()
	note := func(body string) session.Chunk {
		var m map[string]any
		_ = json.Unmarshal([]byte(body), &m)
		c, err := session.Evidence(session.KindNote, m)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	step := []session.Chunk{
		session.Assistant("I can't help with that."),
		note(`{"event":"refusal","round":1,"refusal":"I can't help with that."}`),
	}
	r, err := llm.NewReplay(input, step, llm.ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var deltas []string
	resp, err := r.ChatStream(context.Background(), llm.Request{Messages: llm.MessagesFromChunks(input)},
		func(d string) { deltas = append(deltas, d) })
	if err != nil {
		t.Fatal(err)
	}
	if resp.Refusal != "I can't help with that." || resp.Content != "" || !resp.Chunk().Equal(step[0]) || len(deltas) != 0 {
		t.Fatalf("refusal replayed as %+v (deltas %q)", resp, deltas)
	}
	step = []session.Chunk{session.Assistant("Part"), note(`{"event":"content_filter","round":1}`)}
	r, _ = llm.NewReplay(input, step, llm.ReplayOptions{})
	resp, err = r.ChatStream(context.Background(), llm.Request{Messages: llm.MessagesFromChunks(input)},
		func(d string) { deltas = append(deltas, d) })
	if err != nil || resp.FinishReason != llm.FinishContentFilter || resp.Content != "Part" || !slices.Equal(deltas, []string{"Part"}) {
		t.Fatalf("content filter replayed as %+v, %v (deltas %q)", resp, err, deltas)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Chat(ctx, llm.Request{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %v", err)
	}
}

type providerFunc func(context.Context, llm.Request) (llm.Response, error)

func (f providerFunc) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	return f(ctx, req)
}
