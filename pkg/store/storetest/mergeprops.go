package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rath-run/rath/pkg/session"
)

// mergeModel is the reference model of merge: a transcript is a list of
// tokens, each minted once by the append (or create or compress) that
// recorded it; merge(a, b) is a's tokens followed by b's tokens a lacks.
// Usage is the sum of the costs of the mints a transcript stands for (a
// compression's summary stands for everything it compressed), each once.
type mergeModel struct {
	tokens []modelToken
	// mints are the mints whose cost the transcript carries.
	mints map[int]bool
	// ancestors are the nodes whose every token this one holds (lineage
	// ancestors not behind a compression).
	ancestors map[int]bool
}

type modelToken struct {
	id   int // the chunk's identity
	mint int // which append recorded it
	text string
}

// RunMergeProperties checks [session.Session.Merge] on graphs from open
// against a reference model (tokens with identities, not content) over
// random sequences of create, append, fork, detach, compress and merge,
// whose chunk texts repeat on purpose. After every merge:
//
//   - its transcript is the model's, and its usage is the model's: each
//     append's usage counted once;
//   - no chunk appears twice in it (no side ever appends one chunk twice
//     here: appends of equal text mint distinct chunks);
//   - merging a version with a copy of itself (a fork or a detach) or
//     with one of its lineage ancestors adds nothing;
//   - merging with itself is refused.
//
// Every version's origins map one to one onto the model's tokens. The
// sequences are short (rapid's default 100 of up to 30 operations), so
// this takes about a second on a database.
func RunMergeProperties(t *testing.T, open func(t *testing.T) session.Graph) {
	g := open(t)
	rapid.Check(t, func(rt *rapid.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		type node struct {
			s session.Session
			m mergeModel
		}
		var nodes []node
		costs := map[int]int64{} // mint → its cost
		tokens := 0
		mint := func(text string, cost int64) modelToken {
			id := len(costs)
			costs[id] = cost
			return modelToken{mint: id, text: text}
		}
		// token returns the next chunk of a mint.
		token := func(tok modelToken, text string) modelToken {
			tokens++
			tok.id, tok.text = tokens, text
			return tok
		}
		usageOf := func(m mergeModel) int64 {
			var n int64
			for id := range m.mints {
				n += costs[id]
			}
			return n
		}
		// tokenOf and originOf keep the store's chunk identities and the
		// model's in one-to-one correspondence.
		tokenOf := map[session.Origin]int{}
		originOf := map[int]session.Origin{}
		check := func(what string, n node) {
			cs, err := n.s.Chunks(ctx)
			if err != nil {
				rt.Fatal(err)
			}
			if len(cs) != len(n.m.tokens) {
				rt.Fatalf("%s: %d chunks, model %d", what, len(cs), len(n.m.tokens))
			}
			os := originsOf(ctx, rt, g, n.s.ID())
			for i, c := range cs {
				tok := n.m.tokens[i]
				if c.Text() != tok.text {
					rt.Fatalf("%s: chunk %d is %q, model %q", what, i, c.Text(), tok.text)
				}
				at := tok.id
				if o, ok := originOf[at]; ok && o != os[i] {
					rt.Fatalf("%s: chunk %d has origin %s, model's token %d had %s", what, i, os[i], at, o)
				}
				if tk, ok := tokenOf[os[i]]; ok && tk != at {
					rt.Fatalf("%s: chunk %d's origin %s is model token %d here and %d before", what, i, os[i], at, tk)
				}
				originOf[at], tokenOf[os[i]] = os[i], at
			}
			if got, want := n.s.Usage().TotalTokens, usageOf(n.m); got != want {
				rt.Fatalf("%s: usage %d, model %d", what, got, want)
			}
		}
		add := func(what string, s session.Session, m mergeModel) node {
			n := node{s, m}
			check(what, n)
			nodes = append(nodes, n)
			return n
		}
		texts := rapid.SampledFrom([]string{"yes", "no", "ok"})
		pick := func(label string) (int, node) {
			i := rapid.IntRange(0, len(nodes)-1).Draw(rt, label)
			return i, nodes[i]
		}
		derived := func(i int, from mergeModel) mergeModel {
			anc := maps.Clone(from.ancestors)
			anc[i] = true
			return mergeModel{tokens: from.tokens, mints: from.mints, ancestors: anc}
		}

		steps := rapid.IntRange(1, 30).Draw(rt, "steps")
		for range steps {
			op := "create"
			if len(nodes) > 0 {
				op = rapid.SampledFrom([]string{"create", "append", "append", "fork", "detach", "compress", "merge", "merge", "merge", "copy", "ancestor"}).Draw(rt, "op")
			}
			switch op {
			case "create":
				n := rapid.IntRange(1, 2).Draw(rt, "n")
				var cs []session.Chunk
				m := mergeModel{mints: map[int]bool{}, ancestors: map[int]bool{}}
				tok := mint("", 0)
				m.mints[tok.mint] = true
				for range n {
					t := token(tok, texts.Draw(rt, "text"))
					cs = append(cs, session.User(t.text))
					m.tokens = append(m.tokens, t)
				}
				add("create", must(session.New(ctx, g, cs...))(rt), m)
			case "append":
				i, from := pick("from")
				n := rapid.IntRange(1, 3).Draw(rt, "n")
				cost := int64(rapid.IntRange(0, 9).Draw(rt, "cost"))
				tok := mint("", cost)
				m := derived(i, from.m)
				m.tokens = slices.Clip(slices.Clone(m.tokens))
				m.mints = maps.Clone(from.m.mints)
				m.mints[tok.mint] = true
				var cs []session.Chunk
				for range n {
					t := token(tok, texts.Draw(rt, "text"))
					cs = append(cs, session.Assistant(t.text))
					m.tokens = append(m.tokens, t)
				}
				s := must(from.s.Extend(ctx, session.Extension{Chunks: cs, Usage: session.Usage{TotalTokens: cost}}))(rt)
				add("append", s, m)
			case "fork", "detach":
				i, from := pick("from")
				var s session.Session
				if op == "fork" {
					s = must(from.s.Fork(ctx))(rt)
				} else {
					s = must(from.s.Detach(ctx))(rt)
				}
				add(op, s, derived(i, from.m))
			case "compress":
				_, from := pick("from")
				cost := int64(rapid.IntRange(0, 9).Draw(rt, "cost"))
				tok := token(mint("", cost), texts.Draw(rt, "text"))
				m := mergeModel{tokens: []modelToken{tok}, mints: maps.Clone(from.m.mints), ancestors: map[int]bool{}}
				m.mints[tok.mint] = true
				add("compress", compress(ctx, rt, from.s, tok.text, session.Usage{TotalTokens: cost}), m)
			case "merge", "copy", "ancestor":
				i, a := pick("a")
				var j int
				var b node
				switch op {
				case "merge":
					j, b = pick("b")
				case "copy":
					// a fork or a detach of a: the same chunks.
					b = node{must(a.s.Fork(ctx))(rt), a.m}
					if rapid.Bool().Draw(rt, "detach") {
						b.s = must(a.s.Detach(ctx))(rt)
					}
					j = -1
				case "ancestor":
					anc := slices.Sorted(maps.Keys(a.m.ancestors))
					if len(anc) == 0 {
						continue
					}
					j = rapid.SampledFrom(anc).Draw(rt, "ancestor")
					b = nodes[j]
				}
				if i == j {
					if _, err := a.s.Merge(ctx, b.s); !errors.Is(err, session.ErrInvalidVersion) {
						rt.Fatalf("merge with itself: %v, want ErrInvalidVersion", err)
					}
					continue
				}
				m := derived(i, a.m)
				if j >= 0 {
					m.ancestors[j] = true
					maps.Copy(m.ancestors, b.m.ancestors)
				}
				m.mints = maps.Clone(a.m.mints)
				maps.Copy(m.mints, b.m.mints)
				m.tokens = mergeTokens(a.m.tokens, b.m.tokens)
				s := must(a.s.Merge(ctx, b.s))(rt)
				what := fmt.Sprintf("%s of %d and %d", op, i, j)
				add(what, s, m)
				if op != "merge" && len(s.Version().Chunks) != 0 {
					rt.Fatalf("%s added %d chunks, want none", what, len(s.Version().Chunks))
				}
				seen := map[session.Origin]bool{}
				for _, o := range originsOf(ctx, rt, g, s.ID()) {
					if seen[o] {
						rt.Fatalf("%s holds chunk %s twice", what, o)
					}
					seen[o] = true
				}
			}
		}
	})
}

// mergeTokens is the model's merge: ours, then the tokens of theirs ours
// lacks, in their order.
func mergeTokens(ours, theirs []modelToken) []modelToken {
	have := map[int]bool{}
	for _, t := range ours {
		have[t.id] = true
	}
	out := slices.Clip(slices.Clone(ours))
	for _, t := range theirs {
		if !have[t.id] {
			out = append(out, t)
		}
	}
	return out
}
