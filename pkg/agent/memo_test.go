package agent_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/llm/llmtest"
	"github.com/rath-run/rath/pkg/memory"
	"github.com/rath-run/rath/pkg/memory/sqlitemem"
)

func openMem(t *testing.T) *sqlitemem.Store {
	t.Helper()
	st, err := sqlitemem.Open(context.Background(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func fakeModel(t *testing.T, srv *llmtest.Server) llm.Provider {
	t.Helper()
	p, err := llm.NewOpenAI(llm.OpenAIConfig{BaseURL: srv.URL(), Model: "fake-chat", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCommitExtractsMemos(t *testing.T) {
	ctx := context.Background()
	st := openMem(t)
	srv := llmtest.NewServer(t)
	srv.Enqueue(llmtest.Reply{Content: "\n[\"The user's favorite color is teal.\", \"The user writes Go.\"]\n"})
	out := userSession(t, "My favorite color is teal and I write Go.")

	res, err := agent.Commit(ctx, st, "", out, "helper", &agent.Extractor{Provider: fakeModel(t, srv)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Warning != "" || len(res.Memos) != 2 {
		t.Fatalf("result %+v", res)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 || *reqs[0].Messages[0].Content != agent.ExtractionPrompt || !strings.Contains(*reqs[0].Messages[1].Content, "user: My favorite color is teal") {
		t.Fatalf("extraction request %+v", reqs)
	}
	v := out.ID().String()
	if _, err := st.Read(ctx, "", agent.TranscriptURI(out.ID())); err != nil {
		t.Fatalf("transcript: %v", err)
	}
	for i, want := range []string{"The user's favorite color is teal.", "The user writes Go."} {
		it, err := st.Read(ctx, "", agent.MemoURI(out.ID(), i))
		if err != nil {
			t.Fatal(err)
		}
		if it.Text != want || it.VersionID != v || it.Metadata["source"] != "extraction" || it.Metadata["agent"] != "helper" {
			t.Fatalf("memo %d: %+v", i, it)
		}
	}
	hits, err := st.Recall(ctx, "", memory.Query{Text: "favorite color", Scope: "memory://session/" + v + "/memos/", TopK: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 1 || hits[0].URI != agent.MemoURI(out.ID(), 0) || hits[0].VersionID != v {
		t.Fatalf("recall %+v", hits)
	}

	// Committing the version again with a shorter list drops memo 1.
	srv.Enqueue(llmtest.Reply{Content: `["The user's favorite color is teal."]`})
	if res, err = agent.Commit(ctx, st, "", out, "helper", &agent.Extractor{Provider: fakeModel(t, srv)}); err != nil || res.Warning != "" || len(res.Memos) != 1 {
		t.Fatalf("recommit %+v %v", res, err)
	}
	items, err := st.List(ctx, "", memory.ListOptions{Scope: "memory://session/" + v + "/memos/"})
	if err != nil || len(items) != 1 || items[0].URI != agent.MemoURI(out.ID(), 0) {
		t.Fatalf("memos after recommit %+v %v", items, err)
	}
}

func TestCommitBadExtractionKeepsArchive(t *testing.T) {
	for name, reply := range map[string]llmtest.Reply{
		"prose":       {Content: "Sure! The user likes teal."},
		"wrong shape": {Content: `{"memos":["teal"]}`},
		"not strings": {Content: `["teal", 3]`},
		"model error": {Status: 400, ErrorMessage: "bad request"},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := openMem(t)
			srv := llmtest.NewServer(t)
			srv.Enqueue(reply)
			out := userSession(t, "My favorite color is teal.")
			res, err := agent.Commit(ctx, st, "", out, "", &agent.Extractor{Provider: fakeModel(t, srv)})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(res.Warning, "memo extraction failed") || len(res.Memos) != 0 {
				t.Fatalf("result %+v", res)
			}
			if it, err := st.Read(ctx, "", agent.TranscriptURI(out.ID())); err != nil || !strings.Contains(it.Text, "teal") {
				t.Fatalf("archive %+v %v", it, err)
			}
			items, err := st.List(ctx, "", memory.ListOptions{Scope: "memory://session/"})
			if err != nil || len(items) != 1 {
				t.Fatalf("items %d %v", len(items), err)
			}
		})
	}
}

func TestStepExtractsMemos(t *testing.T) {
	ctx := context.Background()
	st := openMem(t)
	srv := llmtest.NewServer(t)
	srv.Enqueue(llmtest.Reply{Content: "Noted: teal."}, llmtest.Reply{Content: `["Favorite color: teal."]`})
	spec := agent.Spec{Name: "a", Model: "fake-chat", Memory: agent.MemorySpec{Store: "local", Commit: true, Extract: true}}
	a := &agent.Agent{Spec: spec, Provider: fakeModel(t, srv), Memory: st}
	var events []agent.Event
	out, err := a.Step(ctx, userSession(t, "My favorite color is teal."), agent.Meta{OnEvent: func(e agent.Event) { events = append(events, e) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || !events[0].OK || events[0].Memos != 1 || events[0].Warning != "" {
		t.Fatalf("events %+v", events)
	}
	it, err := st.Read(ctx, "", agent.MemoURI(out.ID(), 0))
	if err != nil || it.Text != "Favorite color: teal." || it.VersionID != out.ID().String() {
		t.Fatalf("memo %+v %v", it, err)
	}
	if reqs := srv.Requests(); len(reqs) != 2 || reqs[1].Model != "fake-chat" {
		t.Fatalf("requests %+v", reqs)
	}
}

// The scripted model answers the extraction request with the same reply
// as the step (it counts assistant messages), so its reply is the list.
func TestStepExtractsMemosScripted(t *testing.T) {
	ctx := context.Background()
	st := openMem(t)
	spec := agent.Spec{Name: "a", Model: "scripted", Memory: agent.MemorySpec{Store: "local", Commit: true, Extract: true}}
	a := &agent.Agent{Spec: spec, Provider: &llm.Scripted{Replies: []llm.ScriptReply{{Content: `["Favorite color: teal."]`}}}, Memory: st}
	var events []agent.Event
	out, err := a.Step(ctx, userSession(t, "My favorite color is teal."), agent.Meta{OnEvent: func(e agent.Event) { events = append(events, e) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].Memos != 1 {
		t.Fatalf("events %+v", events)
	}
	if it, err := st.Read(ctx, "", agent.MemoURI(out.ID(), 0)); err != nil || it.Metadata["source"] != "extraction" {
		t.Fatalf("memo %+v %v", it, err)
	}

	// A reply that is not a list: the step and archive stand, the event warns.
	a.Provider = &llm.Scripted{Replies: []llm.ScriptReply{{Content: "Noted."}}}
	events = nil
	out, err = a.Step(ctx, userSession(t, "My favorite color is teal."), agent.Meta{OnEvent: func(e agent.Event) { events = append(events, e) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || !events[0].OK || events[0].Memos != 0 || !strings.Contains(events[0].Warning, "bad memo list") {
		t.Fatalf("events %+v", events)
	}
	if _, err := st.Read(ctx, "", agent.TranscriptURI(out.ID())); err != nil {
		t.Fatal(err)
	}
}

func TestExtractRequiresCommit(t *testing.T) {
	s := agent.Spec{Name: "a", Model: "gpt-4o", Memory: agent.MemorySpec{Store: "local", Extract: true}}
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "memory.extract") {
		t.Fatalf("err %v", err)
	}
}

func TestParseMemos(t *testing.T) {
	good := map[string]int{`[]`: 0, "\n[\"a\"]\t": 1, `["a","b"]`: 2}
	for in, n := range good {
		m, err := agent.ParseMemos(in)
		if err != nil || len(m) != n {
			t.Errorf("%q: %v %v", in, m, err)
		}
	}
	for _, in := range []string{"", "null", `"a"`, `["a"] x`, `["a"][]`, `[""]`, `[1]`, `[null]`, `[["a"]]`, "```json\n[\"a\"]\n```",
		`["` + strings.Repeat("x", agent.MaxMemoBytes+1) + `"]`, `[` + strings.Repeat(`"a",`, agent.MaxMemos) + `"a"]`} {
		if _, err := agent.ParseMemos(in); !errors.Is(err, agent.ErrBadMemos) {
			t.Errorf("%.40q: err %v", in, err)
		}
	}
}

func FuzzParseMemos(f *testing.F) {
	for _, s := range []string{`[]`, `["a","b"]`, `{"memos":[]}`, `["a"] x`, `[1]`, `["\u0000"]`, "[\"\xff\"]", `[`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		m, err := agent.ParseMemos(in)
		if err != nil {
			if !errors.Is(err, agent.ErrBadMemos) {
				t.Fatalf("error does not wrap ErrBadMemos: %v", err)
			}
			return
		}
		if len(m) > agent.MaxMemos {
			t.Fatalf("%d memos", len(m))
		}
		for _, s := range m {
			if s == "" || len(s) > agent.MaxMemoBytes || strings.TrimSpace(s) != s {
				t.Fatalf("bad memo %q", s)
			}
		}
	})
}
