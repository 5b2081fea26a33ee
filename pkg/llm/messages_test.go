package llm_test

import (
	"bufio"
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
)

// loadFixture reads the chunk records of an OpenRath session file (copied
// from the shared OpenRath fixtures into testdata).
func loadFixture(t *testing.T, name string) []session.Chunk {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var chunks []session.Chunk
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec struct {
			RecordType string          `json:"record_type"`
			Kind       session.Kind    `json:"kind"`
			Payload    json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.RecordType != "chunk" {
			continue
		}
		c, err := session.NewChunk(rec.Kind, rec.Payload)
		if err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return chunks
}

func roles(msgs []llm.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Role
	}
	return out
}

func TestMessagesFromChunksOpenRathLoop(t *testing.T) {
	t.Parallel()
	chunks := loadFixture(t, "openrath_loop.jsonl")
	// OpenRath sent round 2 as system (the agent prompt, not stored) + the
	// first six rows (persisted_loop.expected.json request_roles_per_round).
	msgs := llm.MessagesFromChunks(chunks[:6])
	withPrompt := append([]llm.Message{{Role: "system", Content: "agent prompt"}}, msgs...)
	if got, want := roles(withPrompt), []string{"system", "user", "assistant", "tool", "tool", "tool", "tool"}; !reflect.DeepEqual(got, want) {
		t.Errorf("roles = %v, want %v", got, want)
	}
	a := msgs[1]
	if a.Content != "先看看工作区。" || len(a.ToolCalls) != 4 || a.ToolCalls[1].Function.Arguments != `{"path": "hello.txt"` {
		t.Errorf("assistant = %+v", a)
	}
	for i, id := range []string{"call_a", "call_b", "call_c", "call_d"} {
		m := msgs[2+i]
		if m.ToolCallID != id || m.Name != "" {
			t.Errorf("tool message %d = %+v", i, m)
		}
		r, _ := chunks[2+i].ToolResult()
		if m.Content != r.Content {
			t.Errorf("tool message %d content %q, want the stored body %q", i, m.Content, r.Content)
		}
	}
	all := llm.MessagesFromChunks(chunks)
	if last := all[len(all)-1]; last.Role != "assistant" || last.Content != "hello.txt 内容是 “héllo ✓”。🎉" || last.ToolCalls != nil {
		t.Errorf("last = %+v", last)
	}
}

func TestMessagesFromChunksFourKinds(t *testing.T) {
	t.Parallel()
	chunks := loadFixture(t, "openrath_four_kinds.jsonl")
	msgs := llm.MessagesFromChunks(chunks)
	if got, want := roles(msgs), []string{"system", "user", "assistant", "tool", "tool", "tool", "assistant"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("roles = %v, want %v", got, want)
	}
	if msgs[0].Content != chunks[0].Text() {
		t.Errorf("system content = %q", msgs[0].Content)
	}
	// A tool-call-only reply (content null) maps to empty content.
	if msgs[2].Content != "" || len(msgs[2].ToolCalls) != 3 || msgs[2].ToolCalls[0].ID != "call_01" {
		t.Errorf("assistant = %+v", msgs[2])
	}
}

func TestMessagesFromChunksEvidenceAndSummary(t *testing.T) {
	t.Parallel()
	note, _ := session.Evidence(session.KindNote, map[string]any{"text": "for people only"})
	recall, _ := session.Evidence(session.KindMemoryRecall, map[string]any{"items": []string{"x"}})
	summary, err := session.NewChunk(session.KindSummary, []byte(`{"content":"Earlier: the user asked for a Kyoto plan."}`))
	if err != nil {
		t.Fatal(err)
	}
	odd, err := session.NewChunk(session.KindSummary, []byte(`{"facts":["a"]}`))
	if err != nil {
		t.Fatal(err)
	}
	msgs := llm.MessagesFromChunks([]session.Chunk{summary, note, session.User("go on"), recall, odd, {}})
	want := []llm.Message{
		{Role: "user", Content: "Earlier: the user asked for a Kyoto plan."},
		{Role: "user", Content: "go on"},
		{Role: "user", Content: `{"facts":["a"]}`},
	}
	if !reflect.DeepEqual(msgs, want) {
		t.Errorf("messages = %+v, want %+v", msgs, want)
	}
	if got := llm.MessagesFromChunks(nil); len(got) != 0 {
		t.Errorf("nil transcript = %v", got)
	}
}
