package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rath-run/rath/pkg/session"
)

// A merge whose origins extra does not describe its chunks (hand-made,
// posted through the API) is read as new chunks, never a panic or a
// wrong merge.
func TestOriginsIgnoreMalformedExtra(t *testing.T) {
	ctx := context.Background()
	g := session.NewMemoryGraph()
	root, err := session.FromUserMessage(ctx, g, "hello")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := root.Append(ctx, session.Assistant("A1"))
	b, _ := root.Append(ctx, session.Assistant("B1"))
	for _, bad := range []string{`"x"`, `[]`, `[["not-an-id",0,1]]`, `[[1,2]]`, `[["` + b.ID().String() + `",0,5]]`, `[["` + b.ID().String() + `",-1,1]]`, `{"a":1}`} {
		base := a.ID()
		v := &session.Version{
			ID: session.NewID(), Parents: []session.ID{a.ID(), b.ID()}, Base: &base, Op: session.OpMerge,
			Chunks: []session.Chunk{session.Assistant("B1")}, Extras: []session.Extra{{Key: session.ExtraMergeOrigins, Value: json.RawMessage(bad)}},
			CreatedAt: time.Now().UTC(),
		}
		if err := session.Seal(v, []*session.Version{a.Version(), b.Version()}, a.Version()); err != nil {
			t.Fatalf("%s: %v", bad, err)
		}
		if _, err := g.Put(ctx, v); err != nil {
			t.Fatal(err)
		}
		os, err := session.Origins(ctx, g, v.ID)
		if err != nil {
			t.Fatalf("%s: %v", bad, err)
		}
		// Derived instead: B1 is b's last chunk.
		if len(os) != 3 || os[2] != (session.Origin{Version: b.ID(), Index: 0}) {
			t.Fatalf("extra %s: origins %v, want B1's from %s", bad, os, b.ID())
		}
	}
	if _, err := session.Origins(ctx, g, session.NewID()); err == nil {
		t.Fatal("origins of an unknown version: no error")
	}
}

// TestMergeMemoMatchesTheGraph: a chain of merges (a fan-in) reuses what
// the previous merge worked out; every result must equal a merge of the
// same versions reopened from the graph (no memo), and a Session whose
// memo moved on to its merge's result must still merge correctly.
func TestMergeMemoMatchesTheGraph(t *testing.T) {
	ctx := context.Background()
	g := session.NewMemoryGraph()
	root, err := session.FromUserMessage(ctx, g, "hello")
	if err != nil {
		t.Fatal(err)
	}
	var branches []session.Session
	for i := range 6 {
		f, err := root.Fork(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b, err := f.Append(ctx, session.Assistant(fmt.Sprintf("b%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		branches = append(branches, b)
	}
	texts := func(s session.Session) []string {
		t.Helper()
		cs, err := s.Chunks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range cs {
			out = append(out, c.Text())
		}
		return out
	}
	acc := branches[0]
	for i, b := range branches[1:] {
		next, err := acc.Merge(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		// The same merge from versions reopened from the graph.
		ra, err := session.Open(ctx, g, acc.ID())
		if err != nil {
			t.Fatal(err)
		}
		rb, err := session.Open(ctx, g, b.ID())
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := ra.Merge(ctx, rb)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := texts(next), texts(fresh); !slices.Equal(got, want) {
			t.Fatalf("merge %d: with the memo %q, from the graph %q", i+1, got, want)
		}
		if next.Version().Usage != fresh.Version().Usage {
			t.Fatalf("merge %d: usage with the memo %+v, from the graph %+v", i+1, next.Version().Usage, fresh.Version().Usage)
		}
		// acc's memo moved to next: merging acc again starts over and
		// must not see what next brought in.
		again, err := acc.Merge(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := texts(again), texts(fresh); !slices.Equal(got, want) {
			t.Fatalf("merge %d again from the old session: %q, want %q", i+1, got, want)
		}
		acc = next
	}
	want := []string{"hello", "b0", "b1", "b2", "b3", "b4", "b5"}
	if got := texts(acc); !slices.Equal(got, want) {
		t.Fatalf("fan-in = %q, want %q", got, want)
	}
	// Merging a branch already in adds nothing, through the memo too.
	same, err := acc.Merge(ctx, branches[2])
	if err != nil {
		t.Fatal(err)
	}
	if got := texts(same); !slices.Equal(got, want) {
		t.Fatalf("merging a branch already in: %q, want %q", got, want)
	}
}
