package storetest

import (
	"github.com/rath-run/rath/internal/cpustat"

	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// RowCounter is implemented by stores that can count their graph rows; the
// fork benchmark reports rows written per fork with it.
type RowCounter interface {
	CountRows(ctx context.Context) (versions, chunks, edges int64, err error)
}

// RowSizer is implemented by stores that can size a version's own rows;
// the fork benchmark reports the bytes a fork writes with it.
type RowSizer interface {
	RowBytes(ctx context.Context, id session.ID) (int64, error)
}

// reportCPU adds a cpu-ms/op metric to b: the process's CPU time per
// iteration since start. On a shared, loaded machine wall time includes
// waiting for a core; CPU time does not. For the embedded store it covers
// the whole operation (SQLite runs in process), for Postgres only the
// client's side.
func reportCPU(b *testing.B, start time.Duration, ok bool) {
	end, ok2 := cpustat.Self()
	if ok && ok2 && b.N > 0 {
		b.ReportMetric(float64(end-start)/float64(b.N)/1e6, "cpu-ms/op")
	}
}

// memChain builds, in a memory graph, a root followed by n versions each
// made by next, and returns them in commit order.
func memChain(b *testing.B, root []session.Chunk, n int, next func(s session.Session, i int) (session.Session, error)) []*session.Version {
	ctx := ctxFor(b)
	g := session.NewMemoryGraph()
	s := must(session.New(ctx, g, root...))(b)
	for i := range n {
		var err error
		if s, err = next(s, i); err != nil {
			b.Fatal(err)
		}
	}
	return g.Versions()
}

func lines(n int) []session.Chunk {
	out := make([]session.Chunk, n)
	for i := range out {
		out[i] = session.User(fmt.Sprintf("line %d of the transcript, long enough to look like a message", i))
	}
	return out
}

// Bench runs the store benchmarks of docs/architecture.md §10 on stores from open (each
// call a new empty store): commit of one step, fork of a 100,000-chunk
// session, load of a 10,000-chunk version cold and cached, ancestors at
// depth 10,000 and descendants of a root with 100,000 versions. Fixtures are
// bulk-loaded with PutMany.
func Bench(b *testing.B, open func(b *testing.B) store.Store) {
	b.Run("CommitStep", func(b *testing.B) {
		ctx, st := ctxFor(b), open(b)
		s := must(session.FromUserMessage(ctx, st, "go"))(b)
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			i++
			var err error
			s, err = s.Extend(ctx, session.Extension{Op: session.OpStep, Key: fmt.Sprint("step-", i),
				Chunks: []session.Chunk{session.Assistant("", session.ToolCall{ID: "c", Function: session.FunctionCall{Name: "ls", Arguments: "{}"}}),
					session.ToolResultChunk(session.ToolResult{ToolCallID: "c", Name: "ls", Content: `["a"]`})}})
			if err != nil {
				b.Fatal(err)
			}
		}
	})

	b.Run("Fork100k", func(b *testing.B) {
		ctx, st := ctxFor(b), open(b)
		vs := memChain(b, lines(100_000), 0, nil)
		if err := st.PutMany(ctx, vs); err != nil {
			b.Fatal(err)
		}
		s := session.Wrap(st, vs[0])
		rc, _ := st.(RowCounter)
		var v0, c0, e0 int64
		if rc != nil {
			v0, c0, e0 = must3(rc.CountRows(ctx))(b)
		}
		n := 0
		var last session.Session
		cpu, ok := cpustat.Self()
		for b.Loop() {
			var err error
			if last, err = s.Fork(ctx); err != nil {
				b.Fatal(err)
			}
			n++
		}
		reportCPU(b, cpu, ok)
		if rs, ok := st.(RowSizer); ok {
			b.ReportMetric(float64(must(rs.RowBytes(ctx, last.ID()))(b)), "row-bytes/op")
		}
		if rc != nil {
			v1, c1, e1 := must3(rc.CountRows(ctx))(b)
			b.ReportMetric(float64(v1-v0)/float64(n), "versions/op")
			b.ReportMetric(float64(c1-c0)/float64(n), "chunks/op")
			b.ReportMetric(float64(e1-e0)/float64(n), "edges/op")
		}
	})

	load10k := func(b *testing.B) (store.Store, session.ID) {
		ctx, st := ctxFor(b), open(b)
		// 10,000 chunks over a chain of 5,000 two-chunk steps, as a long run makes them.
		vs := memChain(b, nil, 5000, func(s session.Session, i int) (session.Session, error) {
			return s.Extend(ctxFor(b), session.Extension{Op: session.OpStep, Chunks: []session.Chunk{
				session.Assistant(fmt.Sprintf("thinking about step %d of the plan", i)),
				session.ToolResultChunk(session.ToolResult{ToolCallID: "c", Name: "t", Content: `{"ok":true}`})}})
		})
		if err := st.PutMany(ctx, vs); err != nil {
			b.Fatal(err)
		}
		return st, vs[len(vs)-1].ID
	}
	b.Run("Load10kCold", func(b *testing.B) {
		st, tip := load10k(b)
		u, ok := st.(Uncached)
		if !ok {
			b.Skip("store has no uncached load")
		}
		ctx := ctxFor(b)
		cpu, ok := cpustat.Self()
		for b.Loop() {
			if t := must(u.LoadTranscriptUncached(ctx, tip))(b); len(t) != 10_000 {
				b.Fatalf("loaded %d chunks", len(t))
			}
		}
		reportCPU(b, cpu, ok)
	})
	b.Run("Load10kCached", func(b *testing.B) {
		st, tip := load10k(b)
		ctx := ctxFor(b)
		must(st.Transcript(ctx, tip))(b)
		for b.Loop() {
			if t := must(st.Transcript(ctx, tip))(b); len(t) != 10_000 {
				b.Fatalf("loaded %d chunks", len(t))
			}
		}
	})

	b.Run("Ancestors10k", func(b *testing.B) {
		ctx, st := ctxFor(b), open(b)
		vs := memChain(b, []session.Chunk{session.User("root")}, 10_000, func(s session.Session, i int) (session.Session, error) {
			if i%2 == 0 {
				return s.Fork(ctxFor(b))
			}
			return s.Append(ctxFor(b), session.Assistant("x"))
		})
		if err := st.PutMany(ctx, vs); err != nil {
			b.Fatal(err)
		}
		if a, ok := st.(interface{ Analyze(context.Context) error }); ok {
			if err := a.Analyze(ctx); err != nil {
				b.Fatal(err)
			}
		}
		tip := vs[len(vs)-1].ID
		cpu, ok := cpustat.Self()
		for b.Loop() {
			if a := must(st.Ancestors(ctx, tip, 0))(b); len(a) != 10_000 {
				b.Fatalf("%d ancestors", len(a))
			}
		}
		reportCPU(b, cpu, ok)
	})

	b.Run("Descendants100k", func(b *testing.B) {
		ctx, st := ctxFor(b), open(b)
		g := session.NewMemoryGraph()
		root := must(session.FromUserMessage(ctx, g, "root"))(b)
		all := []session.Session{root}
		rng := rand.New(rand.NewPCG(1, 2))
		for len(all) <= 100_000 {
			p := all[len(all)-1-rng.IntN(min(len(all), 64))] // a bushy tree, about 16 deep per 1k
			s := must(p.Fork(ctx))(b)
			all = append(all, s)
		}
		if err := st.PutMany(ctx, g.Versions()); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if d := must(st.Descendants(ctx, root.ID(), 0))(b); len(d) != 100_000 {
				b.Fatalf("%d descendants", len(d))
			}
		}
	})
}

func must3[A, B, C any](a A, bb B, c C, err error) func(testing.TB) (A, B, C) {
	return func(t testing.TB) (A, B, C) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a, bb, c
	}
}
