package storetest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/pkg/session"
)

// texts is a transcript as its chunks' texts joined by commas.
func texts(ctx context.Context, t fatalT, s session.Session) string {
	t.Helper()
	cs := must(s.Chunks(ctx))(t)
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Text()
	}
	return strings.Join(out, ",")
}

func wantTexts(ctx context.Context, t fatalT, what string, s session.Session, want string) {
	t.Helper()
	if got := texts(ctx, t, s); got != want {
		t.Fatalf("%s: transcript %s, want %s", what, got, want)
	}
}

// compress records a compression of s (as a compress step does: parent s,
// no base, one summary chunk) and returns it.
func compress(ctx context.Context, t fatalT, s session.Session, summary string, used session.Usage) session.Session {
	t.Helper()
	v := &session.Version{
		ID:        session.NewID(),
		Parents:   []session.ID{s.ID()},
		Op:        session.OpCompress,
		Chunks:    []session.Chunk{session.User(summary)},
		Placement: s.Placement(),
		Usage:     s.Usage().Add(used),
		CreatedAt: time.Now().UTC().Truncate(time.Microsecond),
	}
	if err := session.Seal(v, []*session.Version{s.Version()}, nil); err != nil {
		t.Fatal(err)
	}
	return session.Wrap(s.Graph(), must(s.Graph().Put(ctx, v))(t))
}

// legacyMerge records a merge the way merges were recorded before origins:
// other's chunks since the base-chain common base, no origins extra.
func legacyMerge(ctx context.Context, t fatalT, a, b session.Session) session.Session {
	t.Helper()
	g := a.Graph()
	theirs := must(b.Chunks(ctx))(t)
	usage := a.Usage().Add(b.Usage())
	if cb, ok := must2(g.CommonBase(ctx, a.ID(), b.ID()))(t); ok {
		cbv := must(g.Get(ctx, cb))(t)
		theirs = theirs[cbv.Len:]
		usage = a.Usage().Add(b.Usage().Sub(cbv.Usage))
	}
	base := a.ID()
	v := &session.Version{
		ID:        session.NewID(),
		Parents:   []session.ID{a.ID(), b.ID()},
		Base:      &base,
		Op:        session.OpMerge,
		Chunks:    slices.Clone(theirs),
		Placement: a.Placement(),
		Usage:     usage,
		CreatedAt: time.Now().UTC().Truncate(time.Microsecond),
	}
	if err := session.Seal(v, []*session.Version{a.Version(), b.Version()}, a.Version()); err != nil {
		t.Fatal(err)
	}
	return session.Wrap(g, must(g.Put(ctx, v))(t))
}

func must2[A, B any](a A, b B, err error) func(t fatalT) (A, B) {
	return func(t fatalT) (A, B) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a, b
	}
}

func step(ctx context.Context, t fatalT, s session.Session, tokens int64, text ...string) session.Session {
	t.Helper()
	cs := make([]session.Chunk, len(text))
	for i, x := range text {
		cs[i] = session.Assistant(x)
	}
	return must(s.Extend(ctx, session.Extension{Chunks: cs, Usage: session.Usage{TotalTokens: tokens}}))(t)
}

// runMerge checks that merge follows lineage (package session, "Merge"):
// each case of the package documentation's pictures, on the graph.
func runMerge(t *testing.T, open func(t *testing.T) session.Graph) {
	t.Run("MergeAfterMerge", func(t *testing.T) {
		// The reproduction of issue 21: root → A1 and B1,B2; M = merge(A,
		// B); B3 appended to B; merge(M, B3) took B1, B2 again.
		t.Parallel()
		ctx, g := ctxFor(t), open(t)
		root := must(session.FromUserMessage(ctx, g, "hello"))(t)
		a := step(ctx, t, must(root.Fork(ctx))(t), 1, "A1")
		b := step(ctx, t, must(root.Fork(ctx))(t), 10, "B1", "B2")
		m := must(a.Merge(ctx, b))(t)
		wantTexts(ctx, t, "merge(A, B)", m, "hello,A1,B1,B2")
		b3 := step(ctx, t, b, 100, "B3")
		m2 := must(m.Merge(ctx, b3))(t)
		wantTexts(ctx, t, "merge(M, B3)", m2, "hello,A1,B1,B2,B3")
		if got := m2.Usage().TotalTokens; got != 111 {
			t.Fatalf("merge(M, B3) usage %d, want 111 (each step once)", got)
		}
		if own := len(m2.Version().Chunks); own != 1 {
			t.Fatalf("merge(M, B3) recorded %d chunks of its own, want 1", own)
		}
		// Both ways round, and again: nothing new, nothing twice.
		wantTexts(ctx, t, "merge(B3, M)", must(b3.Merge(ctx, m))(t), "hello,B1,B2,B3,A1")
		again := must(m2.Merge(ctx, b3))(t)
		wantTexts(ctx, t, "merge(merge(M, B3), B3)", again, "hello,A1,B1,B2,B3")
		if again.Usage() != m2.Usage() {
			t.Fatalf("merging what is there changed usage %+v → %+v", m2.Usage(), again.Usage())
		}
		// A merge with an ancestor adds nothing.
		for _, anc := range []session.Session{root, a, b, m} {
			got := must(m2.Merge(ctx, anc))(t)
			if n := len(got.Version().Chunks); n != 0 || got.Len() != m2.Len() {
				t.Fatalf("merge with ancestor %s added %d chunks", anc.ID(), n)
			}
		}
	})

	t.Run("MergeSameContentIsNotSameChunk", func(t *testing.T) {
		t.Parallel()
		ctx, g := ctxFor(t), open(t)
		root := must(session.FromUserMessage(ctx, g, "ok?"))(t)
		a := step(ctx, t, must(root.Fork(ctx))(t), 0, "yes")
		b := step(ctx, t, must(root.Fork(ctx))(t), 0, "yes", "yes")
		wantTexts(ctx, t, "merge of equal texts", must(a.Merge(ctx, b))(t), "ok?,yes,yes,yes")
		// Two roots with the same content share no chunk.
		other := must(session.FromUserMessage(ctx, g, "ok?"))(t)
		wantTexts(ctx, t, "merge of unrelated roots", must(a.Merge(ctx, other))(t), "ok?,yes,ok?")
	})

	t.Run("MergeForkOfFork", func(t *testing.T) {
		t.Parallel()
		ctx, g := ctxFor(t), open(t)
		root := must(session.FromUserMessage(ctx, g, "r"))(t)
		a := step(ctx, t, must(root.Fork(ctx))(t), 0, "a1")
		aa := step(ctx, t, must(a.Fork(ctx))(t), 0, "aa1")
		ab := step(ctx, t, must(must(a.Fork(ctx))(t).Fork(ctx))(t), 0, "ab1")
		wantTexts(ctx, t, "merge(aa, ab)", must(aa.Merge(ctx, ab))(t), "r,a1,aa1,ab1")
		wantTexts(ctx, t, "merge(root, ab)", must(root.Merge(ctx, ab))(t), "r,a1,ab1")
	})

	t.Run("MergeCrissCross", func(t *testing.T) {
		t.Parallel()
		ctx, g := ctxFor(t), open(t)
		root := must(session.FromUserMessage(ctx, g, "r"))(t)
		x := step(ctx, t, must(root.Fork(ctx))(t), 1, "x1")
		y := step(ctx, t, must(root.Fork(ctx))(t), 2, "y1")
		p := step(ctx, t, must(x.Merge(ctx, y))(t), 4, "p")
		q := step(ctx, t, must(y.Merge(ctx, x))(t), 8, "q")
		got := must(p.Merge(ctx, q))(t)
		wantTexts(ctx, t, "criss-cross merge", got, "r,x1,y1,p,q")
		if u := got.Usage().TotalTokens; u != 15 {
			t.Fatalf("criss-cross usage %d, want 15", u)
		}
		wantTexts(ctx, t, "criss-cross the other way", must(q.Merge(ctx, p))(t), "r,y1,x1,q,p")
	})

	t.Run("MergeThroughDetach", func(t *testing.T) {
		t.Parallel()
		ctx, g := ctxFor(t), open(t)
		root := must(session.FromUserMessage(ctx, g, "hello"))(t)
		a := step(ctx, t, must(root.Fork(ctx))(t), 0, "A1")
		b := step(ctx, t, must(root.Fork(ctx))(t), 0, "B1", "B2")
		m := must(a.Merge(ctx, b))(t)
		d := step(ctx, t, must(b.Detach(ctx))(t), 0, "D1")
		wantTexts(ctx, t, "merge(M, detached B + D1)", must(m.Merge(ctx, d))(t), "hello,A1,B1,B2,D1")
		wantTexts(ctx, t, "merge(detached B + D1, A)", must(d.Merge(ctx, a))(t), "hello,B1,B2,D1,A1")
	})

	t.Run("MergeCompressInBetween", func(t *testing.T) {
		t.Parallel()
		ctx, g := ctxFor(t), open(t)
		root := must(session.FromUserMessage(ctx, g, "hello"))(t)
		a := step(ctx, t, must(root.Fork(ctx))(t), 1, "A1")
		b := step(ctx, t, must(root.Fork(ctx))(t), 10, "B1", "B2")
		m := must(a.Merge(ctx, b))(t)
		c := step(ctx, t, compress(ctx, t, b, "sum", session.Usage{TotalTokens: 100}), 1000, "C1")
		got := must(m.Merge(ctx, c))(t)
		wantTexts(ctx, t, "merge(M, compressed B + C1)", got, "hello,A1,B1,B2,sum,C1")
		// The summary stands for B's history: B's steps are counted once,
		// with the compression's own call.
		if u := got.Usage().TotalTokens; u != 1+10+100+1000 {
			t.Fatalf("usage %d, want %d", u, 1+10+100+1000)
		}
		back := must(c.Merge(ctx, m))(t)
		wantTexts(ctx, t, "merge(compressed B + C1, M)", back, "sum,C1,hello,A1,B1,B2")
		if back.Usage() != got.Usage() {
			t.Fatalf("usage %+v one way, %+v the other", back.Usage(), got.Usage())
		}
		wantTexts(ctx, t, "and again", must(back.Merge(ctx, got))(t), "sum,C1,hello,A1,B1,B2")
	})

	t.Run("MergeAfterLegacyMerge", func(t *testing.T) {
		// Merges recorded before origins have no origins extra: theirs are
		// derived, so the reproduction holds through them too.
		t.Parallel()
		ctx, g := ctxFor(t), open(t)
		root := must(session.FromUserMessage(ctx, g, "hello"))(t)
		a := step(ctx, t, must(root.Fork(ctx))(t), 0, "A1")
		b := step(ctx, t, must(root.Fork(ctx))(t), 0, "B1", "B2")
		m := legacyMerge(ctx, t, a, b)
		b3 := step(ctx, t, b, 0, "B3")
		wantTexts(ctx, t, "merge(legacy M, B3)", must(m.Merge(ctx, b3))(t), "hello,A1,B1,B2,B3")
		// The old duplicating merge keeps its duplicates (they are
		// recorded), and a merge with it adds no third copy.
		dup := legacyMerge(ctx, t, m, b3)
		wantTexts(ctx, t, "legacy merge(M, B3)", dup, "hello,A1,B1,B2,B1,B2,B3")
		wantTexts(ctx, t, "merge(B3, legacy dup)", must(b3.Merge(ctx, dup))(t), "hello,B1,B2,B3,A1")
		if n := len(must(dup.Merge(ctx, b3))(t).Version().Chunks); n != 0 {
			t.Fatalf("merge(dup, B3) added %d chunks", n)
		}
	})
}

// originsOf is session.Origins, failing t.
func originsOf(ctx context.Context, t fataler, g session.Graph, id session.ID) []session.Origin {
	t.Helper()
	o, err := session.Origins(ctx, g, id)
	if err != nil {
		t.Fatalf("origins of %s: %v", id, err)
	}
	return o
}
