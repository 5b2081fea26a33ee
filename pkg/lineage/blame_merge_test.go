package lineage_test

import (
	"context"
	"testing"

	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/session"
)

// A merge of a merge takes only what its first parent lacks; blame still
// follows each taken chunk to the version that produced it.
func TestBlameMergeOfMerge(t *testing.T) {
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			ext := func(s session.Session, agent string, texts ...string) session.Session {
				t.Helper()
				cs := make([]session.Chunk, len(texts))
				for i, x := range texts {
					cs[i] = session.Assistant(x)
				}
				return must[session.Session](t)(s.Extend(ctx, session.Extension{Op: session.OpStep, Chunks: cs, Producer: session.Producer{Agent: agent}}))
			}
			root := must[session.Session](t)(session.FromUserMessage(ctx, st, "hello"))
			a := ext(must[session.Session](t)(root.Fork(ctx)), "a", "A1")
			b := ext(must[session.Session](t)(root.Fork(ctx)), "b", "B1", "B2")
			m := must[session.Session](t)(a.Merge(ctx, b))
			b3 := ext(b, "b", "B3")
			m2 := must[session.Session](t)(m.Merge(ctx, b3))
			got := must[[]lineage.Entry](t)(lineage.Blame(ctx, st, m2.ID()))
			want := []struct {
				version session.ID
				via     []session.ID
			}{
				{root.ID(), nil}, {a.ID(), nil}, {b.ID(), []session.ID{m.ID()}}, {b.ID(), []session.ID{m.ID()}}, {b3.ID(), []session.ID{m2.ID()}},
			}
			if len(got) != len(want) {
				t.Fatalf("blame: %d entries, want %d: %+v", len(got), len(want), got)
			}
			for i, w := range want {
				if e := got[i]; e.Version != w.version || len(e.Via) != len(w.via) || (len(w.via) > 0 && e.Via[0] != w.via[0]) {
					t.Errorf("entry %d = version %s via %v, want %s via %v", i, e.Version, e.Via, w.version, w.via)
				}
			}
			// The other way round: B's side first, then A1, carried by a
			// merge that took only it (M had it from its first parent).
			back := must[session.Session](t)(b3.Merge(ctx, m))
			got = must[[]lineage.Entry](t)(lineage.Blame(ctx, st, back.ID()))
			if len(got) != 5 || got[4].Version != a.ID() || len(got[4].Via) != 1 || got[4].Via[0] != back.ID() {
				t.Errorf("blame of merge(B3, M) = %+v, want A1 from %s via %s", got, a.ID(), back.ID())
			}
		})
	}
}
