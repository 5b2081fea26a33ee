package session_test

import (
	"context"
	"encoding/json"
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
