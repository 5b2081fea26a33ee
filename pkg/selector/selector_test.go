package selector_test

import (
	"context"
	"errors"
	"testing"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/selector"
	"github.com/rath-run/rath/pkg/session"
)

func scripted(name string, replies ...string) agent.Spec {
	s := agent.Spec{Name: name, Model: "scripted"}
	for _, r := range replies {
		s.Script = append(s.Script, llm.ScriptReply{Content: r})
	}
	return s
}

func runtime(t *testing.T) context.Context {
	t.Helper()
	rt, err := flow.NewLocal("sel", flow.Env{Resolve: func(s agent.Spec) (llm.Provider, string, error) {
		return &llm.Scripted{Replies: s.Script}, llm.ScriptedModel, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return flow.WithRuntime(context.Background(), rt)
}

// TestSelectParsesReplies covers OpenRath's parsing contract: the first
// integer of the reply picks the candidate; -1, out of range and no number
// give EmptyWorkflow; the decision is recorded either way.
func TestSelectParsesReplies(t *testing.T) {
	t.Parallel()
	a := flow.NewAgent(scripted("a", "from a"), "first")
	b := flow.NewAgent(scripted("b", "from b"), "second")
	for _, tc := range []struct {
		reply string
		want  flow.Workflow
		index int
	}{
		{"1", b, 1},
		{"0", a, 0},
		{"-1", flow.EmptyWorkflow, -1},
		{"2", flow.EmptyWorkflow, -1},
		{"I pick 1 because it fits best.", b, 1},
		{"Neither applies.", flow.EmptyWorkflow, -1},
	} {
		t.Run(tc.reply, func(t *testing.T) {
			t.Parallel()
			ctx := runtime(t)
			in, err := session.FromUserMessage(ctx, session.NewMemoryGraph(), "route me")
			if err != nil {
				t.Fatal(err)
			}
			got, out, err := selector.New(scripted("router", tc.reply)).Select(ctx, in, a, b)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("chose %v, want %v (by identity)", got, tc.want)
			}
			d, err := flow.DecisionOf(out)
			if err != nil {
				t.Fatal(err)
			}
			if d.Choice != tc.index || d.Reply != tc.reply || len(d.Candidates) != 2 || d.Candidates[1] != "second" {
				t.Fatalf("decision %+v", d)
			}
			if out.Version().Parents[0] != in.ID() || out.Len() != 2 {
				t.Fatalf("decision version does not extend the input: %v", out)
			}
		})
	}
}

func TestSelectNoCandidates(t *testing.T) {
	t.Parallel()
	ctx := runtime(t)
	in, _ := session.FromUserMessage(ctx, session.NewMemoryGraph(), "x")
	got, out, err := selector.New(scripted("router", "0")).Select(ctx, in)
	if err != nil || !flow.IsEmpty(got) || out != in {
		t.Fatalf("no candidates: %v %v %v, want EmptyWorkflow and the same session", got, out, err)
	}
}

func TestSelectNeedsDescribers(t *testing.T) {
	t.Parallel()
	ctx := runtime(t)
	in, _ := session.FromUserMessage(ctx, session.NewMemoryGraph(), "x")
	plain := flow.Func(func(_ context.Context, s session.Session) (session.Session, error) { return s, nil })
	_, _, err := selector.New(scripted("router", "0")).Select(ctx, in, flow.NewAgent(scripted("a", "x"), "a"), plain)
	if !errors.Is(err, selector.ErrNotDescriber) {
		t.Fatalf("error %v, want ErrNotDescriber", err)
	}
}

// TestLoopIsBounded: a selector that always chooses runs MaxRounds
// candidates and stops.
func TestLoopIsBounded(t *testing.T) {
	t.Parallel()
	ctx := runtime(t)
	in, _ := session.FromUserMessage(ctx, session.NewMemoryGraph(), "x")
	echo := flow.NewAgent(scripted("echo", "one", "two", "three", "four"), "echoes")
	l := &selector.Loop{Selector: selector.New(scripted("router", "0", "0", "0", "0", "0")), Candidates: []flow.Workflow{echo}, MaxRounds: 3}
	out, err := l.Forward(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	// user + 3 × (decision + reply)
	if out.Len() != 7 {
		t.Fatalf("transcript of %d chunks, want 7", out.Len())
	}
	l.MaxRounds = 0
	if _, err := l.Forward(ctx, in); err == nil {
		t.Fatal("an unbounded loop ran")
	}
}
