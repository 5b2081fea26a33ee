package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/llm/llmtest"
	"github.com/rath-run/rath/pkg/memory"
	"github.com/rath-run/rath/pkg/memory/sqlitemem"
)

// recording is a scripted provider that keeps the requests it saw.
type recording struct {
	llm.Scripted
	mu   sync.Mutex
	reqs []llm.Request
}

func (r *recording) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	return r.Scripted.Chat(ctx, req)
}

func (r *recording) ChatStream(ctx context.Context, req llm.Request, onDelta func(string)) (llm.Response, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	return r.Scripted.ChatStream(ctx, req, onDelta)
}

func TestMemorySpecForms(t *testing.T) {
	s, err := agent.ParseSpec([]byte("name: a\nmodel: scripted\nscript: [{content: hi}]\nmemory: local\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Memory != (agent.MemorySpec{Store: "local"}) {
		t.Fatalf("string form: %+v", s.Memory)
	}
	b, err := json.Marshal(s)
	if err != nil || !strings.Contains(string(b), `"memory":"local"`) {
		t.Fatalf("string form marshals as %s, %v", b, err)
	}
	s, err = agent.ParseSpec([]byte("name: a\nmodel: scripted\nscript: [{content: hi}]\nmemory: {store: local, commit: true, top_k: 3, namespace: team/a, scope: memory://user}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := agent.MemorySpec{Store: "local", Commit: true, TopK: 3, Namespace: "team/a", Scope: "memory://user"}
	if s.Memory != want {
		t.Fatalf("object form: %+v", s.Memory)
	}
	b, _ = json.Marshal(s)
	var back agent.Spec
	if err := json.Unmarshal(b, &back); err != nil || back.Memory != want {
		t.Fatalf("round trip %s: %+v, %v", b, back.Memory, err)
	}
	if s, err := agent.ParseSpec([]byte("name: a\nmodel: scripted\nscript: [{content: hi}]\n")); err != nil || !s.Memory.IsZero() {
		t.Fatalf("no memory: %+v, %v", s.Memory, err)
	}
	for doc, field := range map[string]string{
		"memory: {store: local, top_k: -1}":      "memory.top_k",
		"memory: {store: local, scope: file:/x}": "memory.scope",
		"memory: {commit: true}":                 "memory.store",
		"memory: {store: local, bogus: 1}":       "bogus",
	} {
		_, err := agent.ParseSpec([]byte("name: a\nmodel: scripted\nscript: [{content: hi}]\n" + doc + "\n"))
		if !errors.Is(err, agent.ErrInvalidSpec) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v, want an error naming %s", doc, err, field)
		}
	}
}

// TestMemoryAcrossRuns: a first run commits its conversation into a store
// file; a second run, in a new session graph with the store reopened,
// recalls it before its step. The recall is in the transcript as a
// memory_recall chunk naming the version that wrote the item, and the model
// saw it as a system message.
func TestMemoryAcrossRuns(t *testing.T) {
	ctx := context.Background()
	path := sqlitemem.DefaultPath(t.TempDir())
	spec := agent.Spec{Name: "rememberer", Model: "scripted", Memory: agent.MemorySpec{Store: "local", Commit: true}}

	st, err := sqlitemem.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	a := &agent.Agent{Spec: spec, Provider: &llm.Scripted{Replies: []llm.ScriptReply{{Content: "Noted: teal."}}}, Memory: st}
	var events []agent.Event
	out1, err := a.Step(ctx, userSession(t, "My favorite color is teal."), agent.Meta{OnEvent: func(e agent.Event) { events = append(events, e) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].Type != "memory.commit" || !events[0].OK {
		t.Fatalf("commit events: %+v", events)
	}
	v1 := out1.ID().String()
	item, err := st.Read(ctx, "", "memory://session/"+v1+"/transcript")
	if err != nil {
		t.Fatal(err)
	}
	if item.VersionID != v1 || !strings.Contains(item.Text, "teal") {
		t.Fatalf("committed item: %+v", item)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st2, err := sqlitemem.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	prov := &recording{Scripted: llm.Scripted{Replies: []llm.ScriptReply{{Content: "Teal."}}}}
	a2 := &agent.Agent{Spec: agent.Spec{Name: "rememberer", Model: "scripted", Memory: agent.MemorySpec{Store: "local"}}, Provider: prov, Memory: st2}
	out2, err := a2.Step(ctx, userSession(t, "What is my favorite color?"), agent.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := out2.Chunks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(chunks); got != "user,memory_recall,assistant" {
		t.Fatalf("transcript kinds %s", got)
	}
	var body agent.RecallBody
	if err := json.Unmarshal(chunks[1].Payload(), &body); err != nil {
		t.Fatal(err)
	}
	if body.Query != "What is my favorite color?" || len(body.Hits) != 1 || body.Error != "" {
		t.Fatalf("recall body %+v", body)
	}
	h := body.Hits[0]
	if h.VersionID != v1 || h.URI != "memory://session/"+v1+"/transcript" || h.Score <= 0 || !strings.Contains(h.Snippet, "teal") {
		t.Fatalf("hit %+v (want written by %s)", h, v1)
	}
	if len(prov.reqs) != 1 {
		t.Fatalf("%d model calls", len(prov.reqs))
	}
	sys := prov.reqs[0].Messages[0]
	if sys.Role != llm.RoleSystem || !strings.HasPrefix(sys.Content, "[memory:memory://session/"+v1+"/transcript] ") || !strings.Contains(sys.Content, "teal") {
		t.Fatalf("model's first message: %+v", sys)
	}
	// No commit was asked for in the second run.
	if items, err := st2.List(ctx, "", memory.ListOptions{}); err != nil || len(items) != 1 {
		t.Fatalf("items after run 2: %d, %v", len(items), err)
	}
}

// TestMemoryRecallFailureIsRecorded: a closed store does not fail the step;
// the memory_recall chunk carries the error.
func TestMemoryRecallFailureIsRecorded(t *testing.T) {
	ctx := context.Background()
	st, err := sqlitemem.Open(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	a := &agent.Agent{Spec: agent.Spec{Name: "a", Model: "scripted", Memory: agent.MemorySpec{Store: "local"}},
		Provider: &llm.Scripted{Replies: []llm.ScriptReply{{Content: "ok"}}}, Memory: st}
	out, err := a.Step(ctx, userSession(t, "hello"), agent.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	chunks, _ := out.Chunks(ctx)
	if kinds(chunks) != "user,memory_recall,assistant" {
		t.Fatalf("kinds %s", kinds(chunks))
	}
	var body agent.RecallBody
	_ = json.Unmarshal(chunks[1].Payload(), &body)
	if chunks[1].Kind() != "memory_recall" || !strings.Contains(body.Error, "store_closed") || len(body.Hits) != 0 {
		t.Fatalf("recall body %+v", body)
	}
}

// TestMemoryEmbeddingFallbackIsRecorded: with embedding recall over an
// embeddings endpoint that is down, the step still recalls (by BM25) and
// the memory_recall chunk records the mode and the warning.
func TestMemoryEmbeddingFallbackIsRecorded(t *testing.T) {
	ctx := context.Background()
	st, err := sqlitemem.Open(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Remember(ctx, "", memory.Write{URI: "memory://user/color", Text: "The favorite color is teal."}); err != nil {
		t.Fatal(err)
	}
	srv := llmtest.NewEmbeddingServer(t, func(string, string) []float32 { return []float32{1} })
	emb, err := llm.NewEmbedder(llm.OpenAIConfig{BaseURL: srv.URL(), Model: "fake-embed", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	a := &agent.Agent{Spec: agent.Spec{Name: "a", Model: "scripted", Memory: agent.MemorySpec{Store: "local"}},
		Provider: &llm.Scripted{Replies: []llm.ScriptReply{{Content: "ok"}}},
		Memory:   &memory.Semantic{Store: st, Embedder: emb, Cache: st}}
	out, err := a.Step(ctx, userSession(t, "favorite color?"), agent.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	chunks, _ := out.Chunks(ctx)
	var body agent.RecallBody
	if err := json.Unmarshal(chunks[1].Payload(), &body); err != nil || chunks[1].Kind() != "memory_recall" {
		t.Fatalf("chunk 1 %s: %v", chunks[1].Kind(), err)
	}
	if body.Mode != memory.ModeBM25 || !strings.Contains(body.Warning, "used BM25") || body.Error != "" || len(body.Hits) != 1 || body.Hits[0].URI != "memory://user/color" {
		t.Fatalf("recall body %+v", body)
	}
}
