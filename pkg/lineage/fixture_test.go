package lineage_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/store/pgstore"
	"github.com/rath-run/rath/pkg/store/sqlitestore"
)

// stores returns a fresh embedded store and, when the test cluster is
// there, a fresh Postgres store (testdb fails in CI without one).
func stores(t *testing.T) map[string]store.Store {
	t.Helper()
	ctx := context.Background()
	out := map[string]store.Store{}
	sq, err := sqlitestore.Open(ctx, sqlitestore.Memory, sqlitestore.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	out["sqlite"] = sq
	if testing.Short() {
		return out
	}
	pg, err := pgstore.Open(ctx, testdb.Postgres(t), pgstore.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	out["postgres"] = pg
	return out
}

// runFixture is a run with fan-out, a rejected branch, a tool call, a
// merge, a selector decision and a compression:
//
//	root ─ plan ─┬ fa ─ a1 (tool call) ─┐
//	             ├ fb ─ b1 ────────────── merge ─ sel ─ comp ─ final
//	             └ fc ─ c1 (rejected)
type runFixture struct {
	root, plan, fa, fb, fc, a1, b1, c1, merge, sel, comp, final session.Session
}

const fixtureRun = "run-1"

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func step(t *testing.T, s session.Session, n int, agent, snapshot string, tokens int64, chunks ...session.Chunk) session.Session {
	t.Helper()
	e := session.Extension{
		Op: session.OpStep, Chunks: chunks,
		Usage: session.Usage{PromptTokens: tokens - 1, CompletionTokens: 1, TotalTokens: tokens},
		Producer: session.Producer{Run: fixtureRun, Step: fixtureRun + "/" + itoa(n), Agent: agent, Model: "model-" + agent,
			Worker: "worker-1"},
		// Keys are unique per fixture, so several fixtures share a store.
		Key: fixtureRun + "/" + itoa(n) + "/" + s.ID().String(),
	}
	if snapshot != "" {
		p := s.Placement()
		p.Backend, p.Snapshot = "local", snapshot
		e.Placement = &p
	}
	return must[session.Session](t)(s.Extend(context.Background(), e))
}

func itoa(n int) string { return string(rune('0'+n/10)) + string(rune('0'+n%10)) }

func buildRun(t *testing.T, g session.Graph) runFixture {
	t.Helper()
	ctx := context.Background()
	var f runFixture
	f.root = must[session.Session](t)(session.New(ctx, g, session.System("you plan"), session.User("plan a trip")))
	f.plan = step(t, f.root, 0, "planner", "", 10, session.Assistant("three options"))
	f.fa = must[session.Session](t)(f.plan.Fork(ctx))
	f.fb = must[session.Session](t)(f.plan.Fork(ctx))
	f.fc = must[session.Session](t)(f.plan.Fork(ctx))
	call := session.ToolCall{ID: "call-1", Type: "function", Function: session.FunctionCall{Name: "search", Arguments: `{"q":"trains"}`}}
	f.a1 = step(t, f.fa, 1, "agent-a", "snap-a", 20,
		session.Assistant("", call),
		session.ToolResultChunk(session.ToolResult{ToolCallID: "call-1", Name: "search", Content: `{"hits":3}`}),
		session.Assistant("by train"))
	f.b1 = step(t, f.fb, 2, "agent-b", "", 30, session.Assistant("by bus"))
	f.c1 = step(t, f.fc, 3, "agent-c", "", 40, session.Assistant("by plane"))
	// Merge needs the same backend on both sides.
	b1l := must[session.Session](t)(f.b1.To(ctx, session.Placement{Backend: "local", Snapshot: "snap-a"}))
	f.merge = must[session.Session](t)(f.a1.Merge(ctx, b1l))
	dec := must[session.Chunk](t)(session.Evidence(session.KindSelectorDecision, map[string]any{
		"selector": "router", "candidates": []string{"writer", "critic"}, "reply": "0", "choice": 0,
	}))
	f.sel = step(t, f.merge, 4, "router", "", 5, dec)
	f.comp = compress(t, f.sel, "summary: train or bus")
	f.final = step(t, f.comp, 6, "writer", "snap-final", 7, session.Assistant("take the train"))
	return f
}

func compress(t *testing.T, in session.Session, text string) session.Session {
	t.Helper()
	sum := must[session.Chunk](t)(session.NewChunk(session.KindSummary, []byte(`{"content":"`+text+`"}`)))
	parent := in.Version()
	v := &session.Version{
		ID: session.NewID(), Parents: []session.ID{parent.ID}, Op: session.OpCompress,
		Chunks: []session.Chunk{sum}, Placement: parent.Placement, Usage: parent.Usage.Add(session.Usage{TotalTokens: 3}),
		Producer:  session.Producer{Run: fixtureRun, Step: fixtureRun + "/05", Agent: "compressor", Model: "model-compressor"},
		Extras:    []session.Extra{{Key: "compression.lossy", Value: json.RawMessage("true")}},
		Key:       fixtureRun + "/05/" + parent.ID.String(),
		CreatedAt: time.Now().UTC().Truncate(time.Microsecond),
	}
	if err := session.Seal(v, []*session.Version{parent}, nil); err != nil {
		t.Fatal(err)
	}
	got := must[*session.Version](t)(in.Graph().Put(context.Background(), v))
	return session.Wrap(in.Graph(), got)
}
