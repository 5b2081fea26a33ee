package storetest

import (
	"errors"
	"fmt"
	"testing"

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
func RunProperties(t *testing.T, open func(t *testing.T) store.Store) {
	ctx := ctxFor(t)
	st := open(t)
	iteration := 0
	rapid.Check(t, func(rt *rapid.T) {
		iteration++
		model := session.NewMemoryGraph()
		type pair struct{ s, m session.Session } // the store's session and the model's
		var live []pair
		keys := map[string]session.ID{}
		record := func(s session.Session) pair {
			got, err := model.Put(ctx, s.Version())
			if err != nil {
				rt.Fatalf("model refused %s %s: %v", s.Op(), s.ID(), err)
			}
			p := pair{s, session.Wrap(model, got)}
			live = append(live, p)
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
					keys[e.Key] = s.ID()
				}
			case "replay":
				if len(keys) == 0 {
					continue
				}
				key := fmt.Sprintf("it%d-k%d", iteration, rapid.IntRange(0, len(keys)-1).Draw(rt, "key"))
				p := pick("from")
				s, err := p.s.Extend(ctx, session.Extension{Op: session.OpStep, Chunks: chunks.Draw(rt, "chunks"), Key: key})
				if err != nil {
					rt.Fatal(err)
				}
				if s.ID() != keys[key] {
					rt.Fatalf("replay of %s committed %s, want the committed %s", key, s.ID(), keys[key])
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
	rep, err := st.Verify(ctx)
	if err != nil {
		t.Fatalf("verify after the property run: %v (%+v)", err, rep)
	}
	if rep.Versions == 0 || len(rep.Problems) != 0 {
		t.Fatalf("verify report %+v", rep)
	}
}
