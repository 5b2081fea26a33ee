package session

import (
	"errors"
	"strings"
	"testing"
)

func TestRedactKeepsHashAndDropsContent(t *testing.T) {
	call := ToolCall{ID: "call-1", Function: FunctionCall{Name: "search", Arguments: `{"q":"the secret"}`}}
	for _, c := range []Chunk{
		User("the secret"),
		System("the secret"),
		Assistant("the secret", call),
		ToolResultChunk(ToolResult{ToolCallID: "call-1", Name: "search", Content: `"the secret"`}),
		mustEvidence(t, KindNote, map[string]string{"text": "the secret"}),
	} {
		r, err := Redact(c, "GDPR request 7")
		if err != nil {
			t.Fatalf("%s: %v", c.Kind(), err)
		}
		if !r.Redacted() || r.RedactionReason() != "GDPR request 7" || r.Kind() != c.Kind() {
			t.Fatalf("%s: redacted=%v reason=%q kind=%s", c.Kind(), r.Redacted(), r.RedactionReason(), r.Kind())
		}
		if r.Hash() != c.Hash() {
			t.Fatalf("%s: hash %s, want the original %s", c.Kind(), r.Hash(), c.Hash())
		}
		if strings.Contains(string(r.Payload()), "secret") || strings.Contains(r.Text(), "secret") {
			t.Fatalf("%s: content survived: %s / %s", c.Kind(), r.Payload(), r.Text())
		}
		if r.Text() != RedactedText {
			t.Fatalf("%s: text %q", c.Kind(), r.Text())
		}
		// A store reads the marker back as the same redacted chunk.
		back, err := ChunkFromCanonical(c.Kind(), r.Payload())
		if err != nil || !back.Redacted() || back.Hash() != c.Hash() || !back.Equal(r) {
			t.Fatalf("%s: reload: %v redacted=%v", c.Kind(), err, back.Redacted())
		}
		// Nobody commits a marker as content.
		if _, err := NewChunk(c.Kind(), r.Payload()); !errors.Is(err, ErrInvalidChunk) {
			t.Fatalf("%s: NewChunk accepted a marker: %v", c.Kind(), err)
		}
		// JSON (API replies, exports) carries the redacted chunk as is.
		js, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var rt Chunk
		if err := rt.UnmarshalJSON(js); err != nil || !rt.Redacted() || rt.Hash() != c.Hash() {
			t.Fatalf("%s: JSON round trip: %v redacted=%v", c.Kind(), err, rt.Redacted())
		}
		again, _ := Redact(r, "other")
		if !again.Equal(r) {
			t.Fatalf("%s: redacting twice changed the chunk", c.Kind())
		}
	}
	a, _ := Redact(Assistant("", call), "x")
	if tc := a.ToolCalls(); len(tc) != 1 || tc[0].ID != "call-1" || tc[0].Function.Name != "search" || tc[0].Function.Arguments != "{}" {
		t.Fatalf("assistant tool calls: %+v", tc)
	}
	tr, _ := Redact(ToolResultChunk(ToolResult{ToolCallID: "call-1", Name: "search", Content: "1"}), "x")
	if res, ok := tr.ToolResult(); !ok || res.ToolCallID != "call-1" || res.Name != "search" || res.Content != RedactedText {
		t.Fatalf("tool result: %+v", res)
	}
}

func TestVersionHashSurvivesRedaction(t *testing.T) {
	chunks := []Chunk{User("hi"), Assistant("the secret")}
	v := &Version{ID: NewID(), Op: OpCreate, Len: 2, Chunks: chunks}
	want := v.ComputeHash(nil, "")
	r, err := Redact(chunks[1], "why")
	if err != nil {
		t.Fatal(err)
	}
	v.Chunks = []Chunk{chunks[0], r}
	if got := v.ComputeHash(nil, ""); got != want {
		t.Fatalf("hash %s after redaction, want %s", got, want)
	}
}

func TestParseRedactedRefusesBadMarkers(t *testing.T) {
	for _, p := range []string{
		`{"rath_redacted":{"hash":"xyz","reason":""}}`,
		`{"rath_redacted":{"hash":"` + strings.Repeat("a", 64) + `","reason":"","extra":1}}`,
		`{"rath_redacted": {"hash":"` + strings.Repeat("a", 64) + `","reason":""}}`,
		`{"rath_redacted":{"reason":"","hash":"` + strings.Repeat("a", 64) + `"}}`,
	} {
		if _, err := ChunkFromCanonical(KindUser, []byte(p)); !errors.Is(err, ErrInvalidChunk) {
			t.Errorf("%s: err %v, want ErrInvalidChunk", p, err)
		}
	}
}

func FuzzParseRedacted(f *testing.F) {
	c, _ := Redact(Assistant("s", ToolCall{ID: "a", Function: FunctionCall{Name: "n"}}), "r")
	f.Add(string(c.Payload()))
	f.Add(`{"rath_redacted":{"hash":"","reason":""}}`)
	f.Fuzz(func(t *testing.T, p string) {
		r, err := ParseRedacted(KindAssistant, []byte(p))
		if err != nil {
			return
		}
		if string(r.Payload()) != p || len(r.Hash()) != 64 {
			t.Fatalf("accepted %q as %q", p, r.Payload())
		}
	})
}

func mustEvidence(t *testing.T, k Kind, body any) Chunk {
	t.Helper()
	c, err := Evidence(k, body)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
