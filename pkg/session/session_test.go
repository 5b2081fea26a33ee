package session_test

import (
	"context"
	"errors"
	"testing"

	"github.com/rath-run/rath/pkg/session"
)

func texts(t *testing.T, s session.Session) []string {
	t.Helper()
	cs, err := s.Chunks(context.Background())
	if err != nil {
		t.Fatalf("chunks: %v", err)
	}
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = string(c.Kind()) + ":" + c.Text()
	}
	return out
}

func must(t *testing.T) func(session.Session, error) session.Session {
	return func(s session.Session, err error) session.Session {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

func equal(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d chunks %q, want %d %q", len(got), got, len(want), want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("chunk %d: got %q, want %q (all: %q)", i, got[i], want[i], got)
		}
	}
}

func TestForkAppendMerge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := session.NewMemoryGraph()
	root := must(t)(session.FromUserMessage(ctx, g, "hi"))
	a := must(t)(root.Fork(ctx))
	if a.Len() != 1 || len(a.Version().Chunks) != 0 {
		t.Fatalf("fork: len %d own %d, want 1 and 0", a.Len(), len(a.Version().Chunks))
	}
	a = must(t)(a.Append(ctx, session.Assistant("from a")))
	b := must(t)(root.Fork(ctx))
	b = must(t)(b.Extend(ctx, session.Extension{
		Op:     session.OpStep,
		Chunks: []session.Chunk{session.Assistant("from b")},
		Usage:  session.Usage{PromptTokens: 10, CompletionTokens: 2, TotalTokens: 12},
	}))
	m := must(t)(a.Merge(ctx, b))
	equal(t, texts(t, m), []string{"user:hi", "assistant:from a", "assistant:from b"})
	if got := m.Parents(); len(got) != 2 || got[0] != a.ID() || got[1] != b.ID() {
		t.Fatalf("merge parents = %v, want [%s %s]", got, a.ID(), b.ID())
	}
	if got := m.Usage(); got.TotalTokens != 12 {
		t.Fatalf("merge usage = %+v, want total 12", got)
	}
	// The inputs are unchanged.
	equal(t, texts(t, a), []string{"user:hi", "assistant:from a"})
	equal(t, texts(t, root), []string{"user:hi"})
}

func TestMergeUnrelatedTakesAll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := session.NewMemoryGraph()
	a := must(t)(session.FromUserMessage(ctx, g, "a"))
	b := must(t)(session.FromAgentPrompt(ctx, g, "sys"))
	b = must(t)(b.Extend(ctx, session.Extension{Usage: session.Usage{TotalTokens: 5}, Chunks: []session.Chunk{session.User("b")}}))
	a = must(t)(a.Extend(ctx, session.Extension{Usage: session.Usage{TotalTokens: 7}}))
	m := must(t)(a.Merge(ctx, b))
	equal(t, texts(t, m), []string{"user:a", "system:sys", "user:b"})
	if m.Usage().TotalTokens != 12 {
		t.Fatalf("usage %+v, want 12", m.Usage())
	}
}

func TestDetachIsRootWithSameRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := session.NewMemoryGraph()
	s := must(t)(session.FromUserMessage(ctx, g, "x"))
	s = must(t)(s.Append(ctx, session.Assistant("y")))
	d := must(t)(s.Detach(ctx))
	if len(d.Parents()) != 0 || d.Op() != session.OpDetach {
		t.Fatalf("detach: parents %v op %s", d.Parents(), d.Op())
	}
	equal(t, texts(t, d), texts(t, s))
}

func TestMergeDifferentBackendsFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := session.NewMemoryGraph()
	root := must(t)(session.FromUserMessage(ctx, g, "x"))
	a := must(t)(root.To(ctx, session.Placement{Backend: "local"}))
	b := must(t)(root.To(ctx, session.Placement{Backend: "docker", Spec: session.Spec{Image: "img"}}))
	if _, err := a.Merge(ctx, b); !errors.Is(err, session.ErrIncompatiblePlacement) {
		t.Fatalf("merge err = %v, want ErrIncompatiblePlacement", err)
	}
	// Placement is sticky through fork.
	f := must(t)(b.Fork(ctx))
	if f.Placement().Backend != "docker" || f.Placement().Spec.Image != "img" {
		t.Fatalf("fork placement = %+v", f.Placement())
	}
}

func TestIdempotentKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := session.NewMemoryGraph()
	root := must(t)(session.FromUserMessage(ctx, g, "x"))
	e := session.Extension{Op: session.OpStep, Key: "step-1", Chunks: []session.Chunk{session.Assistant("one")}}
	s1 := must(t)(root.Extend(ctx, e))
	e.Chunks = []session.Chunk{session.Assistant("two")}
	s2 := must(t)(root.Extend(ctx, e))
	if s1.ID() != s2.ID() {
		t.Fatalf("retried commit made %s, want the first %s", s2.ID(), s1.ID())
	}
	if n := len(g.Versions()); n != 2 {
		t.Fatalf("graph holds %d versions, want 2", n)
	}
}

func TestPutRejectsTamperedHash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := session.NewMemoryGraph()
	root := must(t)(session.FromUserMessage(ctx, g, "x"))
	v := &session.Version{ID: session.NewID(), Parents: []session.ID{root.ID()}, Op: session.OpFork, Len: 1, Hash: "00"}
	base := root.ID()
	v.Base = &base
	if _, err := g.Put(ctx, v); !errors.Is(err, session.ErrHashMismatch) {
		t.Fatalf("put err = %v, want ErrHashMismatch", err)
	}
}

func TestChunkValidation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		kind    session.Kind
		payload string
	}{
		{"unknown kind", "shout", `{"content":"x"}`},
		{"not object", session.KindUser, `"x"`},
		{"unknown field", session.KindUser, `{"content":"x","extra":1}`},
		{"bad utf8", session.KindUser, "{\"content\":\"\xff\"}"},
		{"tool call without id", session.KindAssistant, `{"content":null,"tool_calls":[{"id":"","type":"function","function":{"name":"f","arguments":"{}"}}]}`},
		{"trailing", session.KindNote, `{"a":1} {"b":2}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := session.NewChunk(tc.kind, []byte(tc.payload)); !errors.Is(err, session.ErrInvalidChunk) {
				t.Fatalf("NewChunk(%s, %s) err = %v, want ErrInvalidChunk", tc.kind, tc.payload, err)
			}
		})
	}
}

func TestChunkCanonical(t *testing.T) {
	t.Parallel()
	c, err := session.NewChunk(session.KindNote, []byte(`{ "b": 1.50, "a": "<x>" }`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(c.Payload()), `{"a":"<x>","b":1.50}`; got != want {
		t.Fatalf("payload %s, want %s", got, want)
	}
	a := session.Assistant("", session.ToolCall{ID: "c1", Function: session.FunctionCall{Name: "ls", Arguments: "{}"}})
	if got, want := string(a.Payload()), `{"content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]}`; got != want {
		t.Fatalf("assistant payload %s, want %s", got, want)
	}
	if a.Text() != "" || len(a.ToolCalls()) != 1 {
		t.Fatalf("assistant accessors: %q %v", a.Text(), a.ToolCalls())
	}
}
