package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// RunProperties runs random sequences of create, append, keyed step (and
// replays of earlier keys), fork, detach, merge and place against the store
// from open and against session.MemoryGraph as the model. After every
// sequence each version's transcript (cached and, when the store offers
// [Uncached], from the database) equals the model's, lineage ancestors never
// include the version itself and start with its parents, and at the end
// Store.Verify recomputes every hash from the stored rows.
//
// Each sequence gets its own deadline: a bound on the whole check would
// measure how loaded the machine is (100 sequences under -race beside the
// rest of the suite), not the store.
func RunProperties(t *testing.T, open func(t *testing.T) store.Store) {
	st := open(t)
	iteration := 0
	rapid.Check(t, func(rt *rapid.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		iteration++
		model := session.NewMemoryGraph()
		type pair struct{ s, m session.Session } // the store's session and the model's
		var live []pair
		order := map[session.ID]int{} // commit order of this iteration's versions
		type keyed struct {
			id   session.ID
			from pair // the version the keyed step extended
		}
		keys := map[string]keyed{}
		record := func(s session.Session) pair {
			got, err := model.Put(ctx, s.Version())
			if err != nil {
				rt.Fatalf("model refused %s %s: %v", s.Op(), s.ID(), err)
			}
			p := pair{s, session.Wrap(model, got)}
			live = append(live, p)
			order[s.ID()] = len(order)
			return p
		}
		chunkGen := rapid.Custom(func(t *rapid.T) session.Chunk {
			text := rapid.String().Draw(t, "text")
			switch rapid.IntRange(0, 3).Draw(t, "kind") {
			case 0:
				return session.User(text)
			case 1:
				return session.Assistant(text)
			case 2:
				return session.ToolResultChunk(session.ToolResult{ToolCallID: "c", Name: "t", Content: fmt.Sprintf("%q", text)})
			default:
				c, err := session.Evidence(session.KindNote, map[string]string{"note": text})
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
		})
		chunks := rapid.SliceOfN(chunkGen, 0, 4)
		pick := func(label string) pair { return live[rapid.IntRange(0, len(live)-1).Draw(rt, label)] }

		steps := rapid.IntRange(1, 25).Draw(rt, "steps")
		for range steps {
			op := "create"
			if len(live) > 0 {
				op = rapid.SampledFrom([]string{"create", "append", "step", "replay", "fork", "detach", "merge", "place"}).Draw(rt, "op")
			}
			switch op {
			case "create":
				s, err := session.New(ctx, st, chunks.Draw(rt, "chunks")...)
				if err != nil {
					rt.Fatal(err)
				}
				record(s)
			case "append", "step":
				p := pick("from")
				e := session.Extension{Chunks: chunks.Draw(rt, "chunks")}
				if op == "step" {
					e.Op = session.OpStep
					e.Key = fmt.Sprintf("it%d-k%d", iteration, len(keys))
					e.Usage = session.Usage{TotalTokens: int64(rapid.IntRange(0, 100).Draw(rt, "tokens"))}
				}
				s, err := p.s.Extend(ctx, e)
				if err != nil {
					rt.Fatal(err)
				}
				record(s)
				if e.Key != "" {
					keys[e.Key] = keyed{id: s.ID(), from: p}
				}
			case "replay":
				if len(keys) == 0 {
					continue
				}
				key := fmt.Sprintf("it%d-k%d", iteration, rapid.IntRange(0, len(keys)-1).Draw(rt, "key"))
				// A replay re-executes the step on its input; the same key
				// on another version is a conflict, never the stored one.
				k := keys[key]
				p := k.from
				if other := pick("from"); other.s.ID() != k.from.s.ID() && rapid.Bool().Draw(rt, "elsewhere") {
					if _, err := other.s.Extend(ctx, session.Extension{Op: session.OpStep, Chunks: chunks.Draw(rt, "chunks"), Key: key}); !errors.Is(err, session.ErrConflict) {
						rt.Fatalf("key %s on another version: %v, want a conflict", key, err)
					}
					continue
				}
				s, err := p.s.Extend(ctx, session.Extension{Op: session.OpStep, Chunks: chunks.Draw(rt, "chunks"), Key: key})
				if err != nil {
					rt.Fatal(err)
				}
				if s.ID() != k.id {
					rt.Fatalf("replay of %s committed %s, want the committed %s", key, s.ID(), k.id)
				}
			case "fork", "detach":
				p := pick("from")
				var s session.Session
				var err error
				if op == "fork" {
					s, err = p.s.Fork(ctx)
				} else {
					s, err = p.s.Detach(ctx)
				}
				if err != nil {
					rt.Fatal(err)
				}
				record(s)
			case "place":
				p := pick("from")
				backend := rapid.SampledFrom([]string{"", "local", "docker"}).Draw(rt, "backend")
				s, err := p.s.To(ctx, session.Placement{Backend: backend})
				if err != nil {
					rt.Fatal(err)
				}
				record(s)
			case "merge":
				a, b := pick("a"), pick("b")
				s, err := a.s.Merge(ctx, b.s)
				mm, merr := a.m.Merge(ctx, b.m)
				if (err == nil) != (merr == nil) {
					rt.Fatalf("merge: store error %v, model error %v", err, merr)
				}
				if err != nil {
					if !errors.Is(err, session.ErrIncompatiblePlacement) && !errors.Is(err, session.ErrInvalidVersion) {
						rt.Fatalf("merge: %v", err)
					}
					continue
				}
				want, err := mm.Chunks(ctx)
				if err != nil {
					rt.Fatal(err)
				}
				got, err := s.Chunks(ctx)
				if err != nil {
					rt.Fatal(err)
				}
				sameChunks(rt, "merge transcript vs model merge", got, want)
				if s.Usage() != mm.Usage() {
					rt.Fatalf("merge usage %+v, model %+v", s.Usage(), mm.Usage())
				}
				record(s)
			}
		}
		u, _ := st.(Uncached)
		for _, p := range live {
			want, err := model.Transcript(ctx, p.s.ID())
			if err != nil {
				rt.Fatal(err)
			}
			got, err := st.Transcript(ctx, p.s.ID())
			if err != nil {
				rt.Fatal(err)
			}
			sameChunks(rt, "transcript", got, want)
			if u != nil {
				got, err := u.LoadTranscriptUncached(ctx, p.s.ID())
				if err != nil {
					rt.Fatal(err)
				}
				sameChunks(rt, "uncached transcript", got, want)
				v, err := u.GetUncached(ctx, p.s.ID())
				if err != nil {
					rt.Fatal(err)
				}
				sameVersion(rt, v, p.s.Version())
			}
			anc, err := st.Ancestors(ctx, p.s.ID(), 0)
			if err != nil {
				rt.Fatal(err)
			}
			sameRelatives(rt, "ancestors of "+p.s.ID().String(), anc, modelAncestors(rt, model, order, p.s.ID(), 0))
			limit := rapid.IntRange(1, 4).Draw(rt, "depth")
			near, err := st.Ancestors(ctx, p.s.ID(), limit)
			if err != nil {
				rt.Fatal(err)
			}
			sameRelatives(rt, fmt.Sprintf("ancestors of %s to depth %d", p.s.ID(), limit), near, modelAncestors(rt, model, order, p.s.ID(), limit))
			other := pick("other")
			cb, ok, err := st.CommonBase(ctx, p.s.ID(), other.s.ID())
			mcb, mok, merr := model.CommonBase(ctx, p.s.ID(), other.s.ID())
			if err != nil || merr != nil || ok != mok || cb != mcb {
				rt.Fatalf("common base of %s and %s = %s %v %v, model %s %v %v", p.s.ID(), other.s.ID(), cb, ok, err, mcb, mok, merr)
			}
			parents := map[session.ID]bool{}
			for _, id := range p.s.Parents() {
				parents[id] = true
			}
			for i, a := range anc {
				if a.ID == p.s.ID() {
					rt.Fatalf("version %s is its own ancestor: cycle", a.ID)
				}
				if (i < len(parents)) != (a.Depth == 1) || (a.Depth == 1 && !parents[a.ID]) {
					rt.Fatalf("ancestors of %s start %+v, want its parents %v first", p.s.ID(), anc, p.s.Parents())
				}
			}
		}
	})
	rep, err := st.Verify(ctxFor(t))
	if err != nil {
		t.Fatalf("verify after the property run: %v (%+v)", err, rep)
	}
	if rep.Versions == 0 || len(rep.Problems) != 0 {
		t.Fatalf("verify report %+v", rep)
	}
}

// modelAncestors computes id's ancestors in the model by breadth-first
// search over all parents: shortest depth, nearest first, ties newest first
// (order is the commit order).
func modelAncestors(t fataler, g session.Graph, order map[session.ID]int, id session.ID, maxDepth int) []store.Relative {
	t.Helper()
	ctx := context.Background()
	depth := map[session.ID]int{id: 0}
	frontier := []session.ID{id}
	var out []store.Relative
	for d := 1; len(frontier) > 0 && (maxDepth <= 0 || d <= maxDepth); d++ {
		var next []session.ID
		for _, cur := range frontier {
			v, err := g.Get(ctx, cur)
			if err != nil {
				t.Fatalf("model: %v", err)
			}
			for _, p := range v.Parents {
				if _, seen := depth[p]; seen {
					continue
				}
				depth[p] = d
				next = append(next, p)
				pv, err := g.Get(ctx, p)
				if err != nil {
					t.Fatalf("model: %v", err)
				}
				out = append(out, store.Relative{ID: p, Depth: d, Op: pv.Op, Len: pv.Len, CreatedAt: pv.CreatedAt})
			}
		}
		frontier = next
	}
	slices.SortStableFunc(out, func(a, b store.Relative) int {
		if a.Depth != b.Depth {
			return a.Depth - b.Depth
		}
		return order[b.ID] - order[a.ID]
	})
	return out
}

func sameRelatives(t fataler, what string, got, want []store.Relative) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d versions %+v, want %d %+v", what, len(got), got, len(want), want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.Depth != w.Depth || g.Op != w.Op || g.Len != w.Len || !g.CreatedAt.Equal(w.CreatedAt) {
			t.Fatalf("%s: [%d] = %+v, want %+v (all %+v)", what, i, g, w, got)
		}
	}
}
