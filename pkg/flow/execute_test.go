package flow_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/llm/llmtest"
	"github.com/rath-run/rath/pkg/session"
)

// TestCompressRequestAndVersion checks the compress call on the wire (the
// compressor's prompt, the transcript, the instruction last, no tools) and
// the version it records (op compress, parent the input, no base, one
// summary chunk, cumulative usage).
func TestCompressRequestAndVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := llmtest.NewServer(t)
	srv.Enqueue(llmtest.Reply{Content: "  The user greeted twice.  ", Usage: session.Usage{PromptTokens: 10, CompletionTokens: 4, TotalTokens: 14}})
	g := session.NewMemoryGraph()
	in, err := session.New(ctx, g, session.User("hi"), session.Assistant("hello"), session.User("hi again"))
	if err != nil {
		t.Fatal(err)
	}
	spec := modelSpec("squash")
	spec.Instructions = "You summarize."
	rt, err := flow.NewLocal("c1", serverEnv(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	out, err := flow.Run(ctx, rt, &flow.Compressor{Spec: spec, Instruction: "Two lines."}, in)
	if err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	roles := []string{}
	for _, m := range r.Messages {
		roles = append(roles, m.Role+":"+*m.Content)
	}
	want := []string{"system:You summarize.", "user:hi", "assistant:hello", "user:hi again", "user:Two lines."}
	if strings.Join(roles, "|") != strings.Join(want, "|") {
		t.Fatalf("messages %q, want %q", roles, want)
	}
	if len(r.Tools) != 0 || r.JSON["tool_choice"] != nil {
		t.Fatalf("compress request offered tools: %v / %v", r.Tools, r.JSON["tool_choice"])
	}
	v := out.Version()
	if v.Op != session.OpCompress || v.Base != nil || len(v.Parents) != 1 || v.Parents[0] != in.ID() || v.Key != "c1/1" {
		t.Fatalf("version op %s base %v parents %v key %q", v.Op, v.Base, v.Parents, v.Key)
	}
	if got := texts(t, out); len(got) != 1 || got[0] != `summary:{"content":"The user greeted twice."}` {
		t.Fatalf("transcript %q", got)
	}
	if out.Usage().TotalTokens != in.Usage().TotalTokens+14 {
		t.Fatalf("usage %+v", out.Usage())
	}
	// The summary reaches the next model as a user message.
	msgs := llm.MessagesFromChunks(must(out.Chunks(ctx)))
	if len(msgs) != 1 || msgs[0].Role != llm.RoleUser || msgs[0].Content != "The user greeted twice." {
		t.Fatalf("summary as messages: %+v", msgs)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestOneShotBadReplies: a selector or compressor reply with tool calls, an
// empty one or an odd finish reason is ErrBadReply, and nothing commits.
func TestOneShotBadReplies(t *testing.T) {
	t.Parallel()
	calls := []session.ToolCall{{ID: "c1", Function: session.FunctionCall{Name: "shell", Arguments: "{}"}}}
	for name, reply := range map[string]llmtest.Reply{
		"tool calls": {ToolCalls: calls},
		"empty":      {Content: "   "},
		"finish":     {Content: "0", FinishReason: "function_call"},
	} {
		for _, kind := range []flow.Kind{flow.KindSelect, flow.KindCompress} {
			t.Run(name+"/"+string(kind), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				srv := llmtest.NewServer(t)
				srv.Enqueue(reply)
				g := session.NewMemoryGraph()
				in := mustUser(t, g, "hi")
				call := flow.Call{Kind: kind, Agent: modelSpec("m")}
				if kind == flow.KindSelect {
					call.Candidates = []string{"a"}
				}
				_, err := flow.Execute(ctx, serverEnv(t, srv), "k", call, in)
				if !errors.Is(err, flow.ErrBadReply) {
					t.Fatalf("error %v, want ErrBadReply", err)
				}
				if n := len(g.Versions()); n != 1 {
					t.Fatalf("%d versions, want only the input", n)
				}
			})
		}
	}
}

// TestDecisionIsNotSentToModels: the selector_decision chunk is evidence;
// the next agent's request carries the conversation without it.
func TestDecisionIsNotSentToModels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := llmtest.NewServer(t)
	srv.Enqueue(llmtest.Reply{Content: "0"}, llmtest.Reply{Content: "done"})
	g := session.NewMemoryGraph()
	in := mustUser(t, g, "hi")
	env := serverEnv(t, srv)
	sel, err := flow.Execute(ctx, env, "s", flow.Call{Kind: flow.KindSelect, Agent: modelSpec("router"), Candidates: []string{"helper"}}, in)
	if err != nil {
		t.Fatal(err)
	}
	d, err := flow.DecisionOf(sel)
	if err != nil || d.Choice != 0 || d.Reply != "0" {
		t.Fatalf("decision %+v, %v", d, err)
	}
	menu := srv.Requests()[0].Messages
	if last := menu[len(menu)-1]; *last.Content != "Candidate workflows:\n0: helper\n\nReply with one index, or -1." {
		t.Fatalf("menu message %q", *last.Content)
	}
	if menu[0].Role != llm.RoleSystem || *menu[0].Content != flow.DefaultSelectInstruction {
		t.Fatalf("selector without instructions did not get the default rubric: %+v", menu[0])
	}
	if _, err := flow.Execute(ctx, env, "a", flow.Call{Kind: flow.KindAgent, Agent: modelSpec("helper")}, sel); err != nil {
		t.Fatal(err)
	}
	for _, m := range srv.Requests()[1].Messages {
		if strings.Contains(*m.Content, "candidates") || strings.Contains(*m.Content, "Candidate workflows") {
			t.Fatalf("the agent's request carries the decision: %q", *m.Content)
		}
	}
	if n := len(srv.Requests()[1].Messages); n != 1 {
		t.Fatalf("agent request has %d messages, want the user message only", n)
	}
	var payload map[string]any
	if err := json.Unmarshal(sel.Version().Chunks[0].Payload(), &payload); err != nil || payload["choice"] != float64(0) {
		t.Fatalf("decision payload %s", sel.Version().Chunks[0].Payload())
	}
}

func TestParseChoice(t *testing.T) {
	t.Parallel()
	for reply, want := range map[string]int{
		"1": 1, "0": 0, "-1": -1, "2": -1, "I pick 1 because it fits": 1, "none": -1, "": -1,
		"Option 1, not 0": 1, "-3": -1, "99999999999999999999999": -1, "1.5": 1, "x-1y": -1,
	} {
		if got := flow.ParseChoice(reply, 2); got != want {
			t.Errorf("ParseChoice(%q, 2) = %d, want %d", reply, got, want)
		}
	}
}

// TestBudgetStopsOneShot: a run whose token budget is spent makes no
// selector or compressor call.
func TestBudgetStopsOneShot(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	env := serverEnv(t, srv)
	env.Budget.MaxTokens, env.Budget.UsedTokens = 100, 100
	in := mustUser(t, session.NewMemoryGraph(), "hi")
	_, err := flow.Execute(context.Background(), env, "k", flow.Call{Kind: flow.KindCompress, Agent: modelSpec("m")}, in)
	if !errors.Is(err, flow.ErrBudgetExceeded) || len(srv.Requests()) != 0 {
		t.Fatalf("error %v after %d requests, want ErrBudgetExceeded and none", err, len(srv.Requests()))
	}
}
