// Package storetest is the conformance suite every Session Graph store
// passes: [RunGraph] checks the [session.Graph] contract (the Postgres and
// SQLite stores and [session.MemoryGraph]), [Run] the whole [store.Store]
// contract, [RunProperties] random operation sequences against
// [session.MemoryGraph] as the model, and [Bench] the budgets of docs/architecture.md §10.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// Uncached is implemented by stores that can read a version and a
// transcript from the database, bypassing their caches. The property tests
// and benchmarks use it when present.
type Uncached interface {
	GetUncached(ctx context.Context, id session.ID) (*session.Version, error)
	LoadTranscriptUncached(ctx context.Context, id session.ID) ([]session.Chunk, error)
}

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// must is used as must(f())(t): it fails t when f returned an error.
func must[T any](v T, err error) func(t fatalT) T {
	return func(t fatalT) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func wantErr(t testing.TB, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

// sameVersion fails unless a and b agree on every field the hash covers.
func sameVersion(t fataler, got, want *session.Version) {
	t.Helper()
	if got.ID != want.ID || got.Hash != want.Hash || got.Op != want.Op || got.Len != want.Len ||
		!slices.Equal(got.Parents, want.Parents) || (got.Base == nil) != (want.Base == nil) ||
		(got.Base != nil && *got.Base != *want.Base) || got.Key != want.Key || got.Usage != want.Usage ||
		got.Producer != want.Producer || !got.CreatedAt.Equal(want.CreatedAt) ||
		fmt.Sprint(got.Placement) != fmt.Sprint(want.Placement) || len(got.Chunks) != len(want.Chunks) ||
		fmt.Sprint(got.Extras) != fmt.Sprint(want.Extras) || (got.Extras == nil) != (want.Extras == nil) {
		t.Fatalf("version %s differs:\n got  %+v\n want %+v", want.ID, got, want)
	}
	for i := range got.Chunks {
		if !got.Chunks[i].Equal(want.Chunks[i]) {
			t.Fatalf("version %s chunk %d: got %s, want %s", want.ID, i, got.Chunks[i], want.Chunks[i])
		}
	}
}

func sameChunks(t fataler, what string, got, want []session.Chunk) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d chunks, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !got[i].Equal(want[i]) {
			t.Fatalf("%s: chunk %d is %s, want %s", what, i, got[i], want[i])
		}
	}
}

// RunGraph checks the session.Graph contract on graphs from open, which
// must return a new empty graph each call.
func RunGraph(t *testing.T, open func(t *testing.T) session.Graph) {
	RunGraphWith(t, open, GraphOptions{})
}

// GraphOptions say which optional parts of the contract a graph keeps.
type GraphOptions struct {
	// RefusesKeys: the graph refuses a version carrying a key with
	// session.ErrInvalidVersion, as the coordinator's API does for its
	// clients (keys are the system's: a step's output is committed under
	// its step id). The keyed cases then check that refusal and that
	// nothing was stored; the rest runs without keys.
	RefusesKeys bool
}

// RunGraphWith is [RunGraph] for a graph that keeps the contract as o
// says (client.Graph, over the coordinator's API).
func RunGraphWith(t *testing.T, open func(t *testing.T) session.Graph, o GraphOptions) {
	// key is k, or none for a graph that refuses keys.
	key := func(k string) string {
		if o.RefusesKeys {
			return ""
		}
		return k
	}
	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		ctx, g := ctxFor(t), open(t)
		root := must(session.New(ctx, g, session.System("be brief <ok> & \"quoted\""), session.User("héllo ✓")))(t)
		step := must(root.Extend(ctx, session.Extension{
			Op:       session.OpStep,
			Chunks:   []session.Chunk{session.Assistant("", session.ToolCall{ID: "c1", Function: session.FunctionCall{Name: "ls", Arguments: `{"dir":"."}`}}), session.ToolResultChunk(session.ToolResult{ToolCallID: "c1", Name: "ls", Content: `["a.go"]`})},
			Usage:    session.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15},
			Producer: session.Producer{Run: "r1", Step: "s1", Agent: "coder", Model: "m", Worker: "w1", TraceID: "t1"},
			Extras: []session.Extra{session.StringExtra("why", "because"), {Key: "n", Value: []byte("1e2")},
				{Key: "raw", Value: []byte(` {"b": [1, 2.50], "a": "<&>"} `)}, {Key: "empty"}},
			Key: key("step-1"),
		}))(t)
		ev, err := session.Evidence(session.KindNote, map[string]any{"b": 2, "a": []int{1}})
		if err != nil {
			t.Fatal(err)
		}
		placed := must(step.To(ctx, session.Placement{Backend: "docker", Spec: session.Spec{Image: "alpine", Env: map[string]string{"A": "1"}, TimeoutSeconds: 1.5}, Snapshot: "snap1"}))(t)
		noted := must(placed.Append(ctx, ev))(t)
		fork := must(noted.Fork(ctx))(t)
		det := must(fork.Detach(ctx))(t)
		// A version created outside session ops: nanosecond time, empty extras.
		odd := &session.Version{ID: session.NewID(), Op: session.OpImport, Chunks: []session.Chunk{session.User("x")},
			Extras: []session.Extra{}, CreatedAt: time.Date(2024, 1, 2, 3, 4, 5, 123456789, time.FixedZone("X", 3600))}
		if err := session.Seal(odd, nil, nil); err != nil {
			t.Fatal(err)
		}
		must(g.Put(ctx, odd))(t)
		empty := must(session.New(ctx, g))(t)
		want := map[session.ID][]session.Chunk{}
		full := []session.Chunk{session.System("be brief <ok> & \"quoted\""), session.User("héllo ✓")}
		want[root.ID()] = slices.Clone(full)
		full = append(full, step.Version().Chunks...)
		want[step.ID()], want[placed.ID()] = slices.Clone(full), slices.Clone(full)
		full = append(full, ev)
		want[noted.ID()], want[fork.ID()], want[det.ID()] = full, full, full
		want[odd.ID] = []session.Chunk{session.User("x")}
		want[empty.ID()] = nil
		for _, s := range []*session.Version{root.Version(), step.Version(), placed.Version(), noted.Version(), fork.Version(), det.Version(), odd, empty.Version()} {
			got := must(g.Get(ctx, s.ID))(t)
			sameVersion(t, got, s)
			sameChunks(t, "transcript of "+string(s.Op), must(g.Transcript(ctx, s.ID))(t), want[s.ID])
			if u, ok := g.(Uncached); ok {
				sameVersion(t, must(u.GetUncached(ctx, s.ID))(t), s)
				sameChunks(t, "uncached transcript of "+string(s.Op), must(u.LoadTranscriptUncached(ctx, s.ID))(t), want[s.ID])
			}
		}
	})

	t.Run("ExportImport", func(t *testing.T) {
		t.Parallel()
		ctx, g := ctxFor(t), open(t)
		root := must(session.New(ctx, g, session.System("s"), session.User("u")))(t)
		// Extras as callers build them (unsorted keys, spaces, HTML escapes,
		// no value): sealing canonicalises them, so the hash survives the
		// store's JSON column and an export.
		step := must(root.Extend(ctx, session.Extension{Op: session.OpStep, Chunks: []session.Chunk{session.Assistant("a")},
			Extras: []session.Extra{{Key: "raw", Value: []byte(` {"b": 1, "a": "\u003cx\u003e"} `)}, {Key: "none"}}}))(t)
		f := must(step.Fork(ctx))(t)
		head := must(must(f.Append(ctx, session.User("more")))(t).Merge(ctx, step))(t)
		var buf bytes.Buffer
		if err := session.Export(ctx, g, head.ID(), &buf); err != nil {
			t.Fatal(err)
		}
		into := open(t)
		got := must(session.Import(ctx, into, &buf))(t)
		if got.Hash() != head.Hash() {
			t.Fatalf("imported head hash %s, want %s", got.Hash(), head.Hash())
		}
		sameVersion(t, must(into.Get(ctx, step.ID()))(t), step.Version())
		sameChunks(t, "imported transcript", must(into.Transcript(ctx, head.ID()))(t), must(head.Chunks(ctx))(t))
		if u, ok := into.(Uncached); ok {
			sameVersion(t, must(u.GetUncached(ctx, step.ID()))(t), step.Version())
		}
		if vr, ok := into.(interface {
			Verify(context.Context) (store.VerifyReport, error)
		}); ok {
			if _, err := vr.Verify(ctx); err != nil {
				t.Fatalf("verify after import: %v", err)
			}
		}
	})

	t.Run("UnknownIDs", func(t *testing.T) {
		t.Parallel()
		ctx, g := ctxFor(t), open(t)
		s := must(session.FromUserMessage(ctx, g, "hi"))(t)
		unknown := session.NewID()
		_, err := g.Get(ctx, unknown)
		wantErr(t, err, session.ErrNotFound, "get unknown")
		_, err = g.Transcript(ctx, unknown)
		wantErr(t, err, session.ErrNotFound, "transcript unknown")
		_, _, err = g.CommonBase(ctx, s.ID(), unknown)
		wantErr(t, err, session.ErrNotFound, "common base with unknown")
		_, err = session.Open(ctx, g, unknown)
		wantErr(t, err, session.ErrNotFound, "open unknown")
		_, err = session.ParseID("not-a-uuid")
		wantErr(t, err, session.ErrInvalidID, "parse id")
	})

	t.Run("PutRefusesBadLinks", func(t *testing.T) {
		t.Parallel()
		ctx, g := ctxFor(t), open(t)
		s := must(session.FromUserMessage(ctx, g, "hi"))(t)
		orphan := &session.Version{ID: session.NewID(), Parents: []session.ID{session.NewID()}, Op: session.OpFork, CreatedAt: time.Now()}
		orphan.Base = &orphan.Parents[0]
		orphan.Hash = orphan.ComputeHash([]string{"x"}, "x")
		_, err := g.Put(ctx, orphan)
		wantErr(t, err, session.ErrNotFound, "put with a missing parent")
		bad := &session.Version{ID: session.NewID(), Parents: []session.ID{s.ID()}, Base: idp(s.ID()), Op: session.OpFork, Len: s.Len(), CreatedAt: time.Now(), Hash: s.Hash()}
		_, err = g.Put(ctx, bad)
		wantErr(t, err, session.ErrHashMismatch, "put with a wrong hash")
		_, err = g.Get(ctx, bad.ID)
		wantErr(t, err, session.ErrNotFound, "refused version must not be stored")
	})

	t.Run("IdempotentKeyAndConflict", func(t *testing.T) {
		t.Parallel()
		ctx, g := ctxFor(t), open(t)
		s := must(session.FromUserMessage(ctx, g, "hi"))(t)
		if o.RefusesKeys {
			plain := must(s.Extend(ctx, session.Extension{Op: session.OpAppend, Chunks: []session.Chunk{session.Assistant("other")}}))(t).Version()
			// The same content under a key: refused, and not stored.
			v := &session.Version{ID: session.NewID(), Parents: plain.Parents, Base: plain.Base, Op: session.OpStep,
				Chunks: []session.Chunk{session.Assistant("first")}, CreatedAt: time.Now(), Key: "k"}
			if err := session.Seal(v, []*session.Version{s.Version()}, s.Version()); err != nil {
				t.Fatal(err)
			}
			_, err := g.Put(ctx, v)
			wantErr(t, err, session.ErrInvalidVersion, "put with a key")
			_, err = g.Get(ctx, v.ID)
			wantErr(t, err, session.ErrNotFound, "a refused keyed version must not be stored")
			// The same version again is a no-op; the same id with other content a conflict.
			if got := must(g.Put(ctx, plain))(t); got.Hash != plain.Hash {
				t.Fatalf("re-put returned hash %s, want %s", got.Hash, plain.Hash)
			}
			other := &session.Version{ID: plain.ID, Parents: plain.Parents, Base: plain.Base, Op: session.OpAppend,
				Chunks: []session.Chunk{session.Assistant("another")}, CreatedAt: plain.CreatedAt}
			if err := session.Seal(other, []*session.Version{s.Version()}, s.Version()); err != nil {
				t.Fatal(err)
			}
			_, err = g.Put(ctx, other)
			wantErr(t, err, session.ErrConflict, "same id, different content")
			return
		}
		a := must(s.Extend(ctx, session.Extension{Op: session.OpStep, Chunks: []session.Chunk{session.Assistant("first")}, Key: "k"}))(t)
		b := must(s.Extend(ctx, session.Extension{Op: session.OpStep, Chunks: []session.Chunk{session.Assistant("second")}, Key: "k"}))(t)
		if a.ID() != b.ID() || a.Hash() != b.Hash() {
			t.Fatalf("replayed key committed a new version %s, want %s", b.ID(), a.ID())
		}
		sameChunks(t, "replayed transcript", must(b.Chunks(ctx))(t), []session.Chunk{session.User("hi"), session.Assistant("first")})
		// The same version again is a no-op; the same id with other content a conflict.
		v := a.Version()
		again := *v
		if got := must(g.Put(ctx, &again))(t); got.Hash != v.Hash {
			t.Fatalf("re-put returned hash %s, want %s", got.Hash, v.Hash)
		}
		other := &session.Version{ID: v.ID, Parents: v.Parents, Base: v.Base, Op: session.OpAppend,
			Chunks: []session.Chunk{session.Assistant("other")}, CreatedAt: v.CreatedAt}
		if err := session.Seal(other, []*session.Version{s.Version()}, s.Version()); err != nil {
			t.Fatal(err)
		}
		_, err := g.Put(ctx, other)
		wantErr(t, err, session.ErrConflict, "same id, different content")
	})

	t.Run("KeyedPutRefusesAnotherCommit", func(t *testing.T) {
		if o.RefusesKeys {
			return // IdempotentKeyAndConflict checks the refusal
		}
		t.Parallel()
		ctx, g := ctxFor(t), open(t)
		// A step's output holds its key; a version on other parents (a
		// squatter's, or another op) under the same key is a conflict,
		// never answered with the stored version, in either order.
		in := must(session.FromUserMessage(ctx, g, "input"))(t)
		step := session.Producer{Run: "run_1", Step: "run_1/0"}
		real := must(in.Extend(ctx, session.Extension{Op: session.OpStep, Chunks: []session.Chunk{session.Assistant("real")}, Producer: step, Key: "run_1/0"}))(t)
		bait := must(session.FromUserMessage(ctx, g, "bait"))(t)
		_, err := bait.Extend(ctx, session.Extension{Op: session.OpStep, Chunks: []session.Chunk{session.Assistant("forged")}, Producer: step, Key: "run_1/0"})
		wantErr(t, err, session.ErrConflict, "same key on other parents")
		_, err = in.Extend(ctx, session.Extension{Op: session.OpAppend, Chunks: []session.Chunk{session.Assistant("forged")}, Key: "run_1/0"})
		wantErr(t, err, session.ErrConflict, "same key, other op and producer")
		// The step re-executed (other content, same parents, op and
		// producer) is a replay: it gets the stored version.
		again := must(in.Extend(ctx, session.Extension{Op: session.OpStep, Chunks: []session.Chunk{session.Assistant("anew")}, Producer: step, Key: "run_1/0"}))(t)
		if again.ID() != real.ID() {
			t.Fatalf("re-executed step got %s, want the stored %s", again.ID(), real.ID())
		}
		// A squatter first: the real commit fails loudly instead of
		// adopting the squatter's version.
		squat := must(bait.Extend(ctx, session.Extension{Op: session.OpStep, Chunks: []session.Chunk{session.Assistant("squat")}, Key: "run_2/0"}))(t)
		_, err = in.Extend(ctx, session.Extension{Op: session.OpStep, Chunks: []session.Chunk{session.Assistant("real")}, Producer: session.Producer{Run: "run_2", Step: "run_2/0"}, Key: "run_2/0"})
		wantErr(t, err, session.ErrConflict, "the real commit after a squat")
		if got := must(g.Put(ctx, squat.Version()))(t); got.ID != squat.ID() {
			t.Fatalf("key run_2/0 holds %s, want the first commit %s", got.ID, squat.ID())
		}
	})

	t.Run("ForkMergeCommonBase", func(t *testing.T) {
		t.Parallel()
		ctx, g := ctxFor(t), open(t)
		root := must(session.FromUserMessage(ctx, g, "plan"))(t)
		a := must(must(root.Fork(ctx))(t).Append(ctx, session.Assistant("A")))(t)
		b := must(must(root.Fork(ctx))(t).Extend(ctx, session.Extension{Chunks: []session.Chunk{session.Assistant("B")}, Usage: session.Usage{TotalTokens: 7}}))(t)
		cb, ok, err := g.CommonBase(ctx, a.ID(), b.ID())
		if err != nil || !ok || cb != root.ID() {
			t.Fatalf("common base = %s %v %v, want %s", cb, ok, err, root.ID())
		}
		m := must(a.Merge(ctx, b))(t)
		sameChunks(t, "merge", must(m.Chunks(ctx))(t), []session.Chunk{session.User("plan"), session.Assistant("A"), session.Assistant("B")})
		if m.Usage().TotalTokens != 7 {
			t.Fatalf("merge usage %d, want 7", m.Usage().TotalTokens)
		}
		other := must(session.FromUserMessage(ctx, g, "unrelated"))(t)
		if _, ok, err := g.CommonBase(ctx, a.ID(), other.ID()); ok || err != nil {
			t.Fatalf("unrelated sessions share a base: %v %v", ok, err)
		}
		if cb, ok, _ := g.CommonBase(ctx, m.ID(), a.ID()); !ok || cb != a.ID() {
			t.Fatalf("common base of merge and its first parent = %s, want %s", cb, a.ID())
		}
		d := must(a.Detach(ctx))(t)
		if cb, ok, _ := g.CommonBase(ctx, d.ID(), b.ID()); !ok || cb != root.ID() {
			t.Fatalf("common base through a detach = %s %v, want %s", cb, ok, root.ID())
		}
		placed := must(b.To(ctx, session.Placement{Backend: "docker"}))(t)
		local := must(a.To(ctx, session.Placement{Backend: "local"}))(t)
		_, err = local.Merge(ctx, placed)
		wantErr(t, err, session.ErrIncompatiblePlacement, "merge across backends")
		foreign := must(session.FromUserMessage(ctx, open(t), "elsewhere"))(t)
		_, err = a.Merge(ctx, foreign)
		wantErr(t, err, session.ErrDifferentGraph, "merge across graphs")
	})

	t.Run("ConcurrentAppends", func(t *testing.T) {
		t.Parallel()
		ctx, g := ctxFor(t), open(t)
		root := must(session.FromUserMessage(ctx, g, "go"))(t)
		const workers, steps = 4, 10
		heads := make([]session.Session, workers)
		errs := make(chan error, workers)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := root
				for i := range steps {
					var err error
					if s, err = s.Extend(ctx, session.Extension{Chunks: []session.Chunk{session.Assistant(fmt.Sprintf("w%d-%d", w, i))}, Key: key(fmt.Sprintf("w%d-%d", w, i))}); err != nil {
						errs <- err
						return
					}
				}
				heads[w] = s
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for w, h := range heads {
			got := must(g.Transcript(ctx, h.ID()))(t)
			if len(got) != steps+1 || got[steps].Text() != fmt.Sprintf("w%d-%d", w, steps-1) {
				t.Fatalf("worker %d transcript %v", w, got)
			}
		}
	})

	runMerge(t, open)
}

// fatalT is what must and the merge helpers need of a *testing.T or a
// *rapid.T.
type fatalT interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// fataler is what the comparison helpers need of a *testing.T or *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

func idp(id session.ID) *session.ID { return &id }
