package storetest

import (
	"context"
	"testing"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// Branchy is a small graph with every shape lanes meet (a chain, forks that
// both grow, a merge, a detach, a placement move) and what a store must
// answer about it.
type Branchy struct {
	versions    []session.Session
	transcripts map[session.ID][]session.Chunk
	ancestors   map[session.ID][]store.Relative
	heads       [2]session.Session
	base        session.ID
}

// BuildBranchy writes the Branchy graph into st and records its answers.
func BuildBranchy(t testing.TB, st store.Store) *Branchy {
	t.Helper()
	ctx := context.Background()
	root := must(session.New(ctx, st, session.System("s"), session.User("u")))(t)
	s := root
	var all []session.Session
	all = append(all, root)
	for range 3 {
		s = must(s.Append(ctx, session.Assistant("chain")))(t)
		all = append(all, s)
	}
	a := must(s.Fork(ctx))(t)
	b := must(s.Fork(ctx))(t)
	a2 := must(a.Append(ctx, session.Assistant("a")))(t)
	b2 := must(b.Append(ctx, session.Assistant("b")))(t)
	b3 := must(b2.To(ctx, session.Placement{Backend: "local"}))(t)
	m := must(a2.Merge(ctx, b3))(t)
	d := must(m.Detach(ctx))(t)
	d2 := must(d.Append(ctx, session.User("after detach")))(t)
	all = append(all, a, b, a2, b2, b3, m, d, d2)
	out := &Branchy{versions: all, transcripts: map[session.ID][]session.Chunk{}, ancestors: map[session.ID][]store.Relative{},
		heads: [2]session.Session{b3, d2}, base: s.ID()}
	for _, v := range all {
		out.transcripts[v.ID()] = must(v.Chunks(ctx))(t)
		out.ancestors[v.ID()] = must(st.Ancestors(ctx, v.ID(), 0))(t)
	}
	return out
}

// Check reads every version back from st (uncached when st can) and
// compares it with what BuildBranchy recorded, then grows the graph and
// verifies the store.
func (b *Branchy) Check(t testing.TB, st store.Store) {
	t.Helper()
	ctx := context.Background()
	u, _ := st.(Uncached)
	for _, v := range b.versions {
		got := must(st.Transcript(ctx, v.ID()))(t)
		if u != nil {
			got = must(u.LoadTranscriptUncached(ctx, v.ID()))(t)
		}
		sameChunks(t, "transcript of "+string(v.Op()), got, b.transcripts[v.ID()])
		anc := must(st.Ancestors(ctx, v.ID(), 0))(t)
		want := b.ancestors[v.ID()]
		if len(anc) != len(want) {
			t.Fatalf("ancestors of %s: %+v, want %+v", v.Op(), anc, want)
		}
		for i := range anc {
			if anc[i].ID != want[i].ID || anc[i].Depth != want[i].Depth {
				t.Fatalf("ancestors of %s: %+v, want %+v", v.Op(), anc, want)
			}
		}
	}
	if cb, ok, err := st.CommonBase(ctx, b.heads[0].ID(), b.heads[1].ID()); err != nil || !ok || cb != b.base {
		t.Fatalf("common base = %s %v %v, want %s", cb, ok, err, b.base)
	}
	// The graph keeps growing from old versions: a new branch off the chain
	// and a longer head.
	for _, from := range []session.Session{b.versions[2], b.heads[1]} {
		s := must(from.Append(ctx, session.Assistant("later")))(t)
		want := append(append([]session.Chunk{}, b.transcripts[from.ID()]...), session.Assistant("later"))
		sameChunks(t, "transcript grown after the migration", must(st.Transcript(ctx, s.ID()))(t), want)
		if u != nil {
			sameChunks(t, "uncached transcript grown after the migration", must(u.LoadTranscriptUncached(ctx, s.ID()))(t), want)
		}
	}
	if _, err := st.Verify(ctx); err != nil {
		t.Fatalf("verify: %v", err)
	}
}
