package trainset

import (
	"encoding/json"

	"github.com/rath-run/rath/pkg/session"
)

// OpenAIRecord is one line of the OpenAI fine-tuning chat format, with
// Rath's provenance alongside.
type OpenAIRecord struct {
	Messages   []Message         `json:"messages"`
	Tools      []json.RawMessage `json:"tools,omitempty"`
	Provenance Provenance        `json:"provenance"`
}

// Message is one chat message: role system, user, assistant or tool.
type Message struct {
	Role       string             `json:"role"`
	Content    *string            `json:"content"`
	ToolCalls  []session.ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string             `json:"tool_call_id,omitempty"`
	Name       string             `json:"name,omitempty"`
}

// Messages maps a transcript's model-facing chunks to chat messages:
// system and summary chunks become system messages, tool results tool
// messages; evidence chunks are left out. It returns a reason instead when
// the transcript makes no supervised example: a redaction under
// [DropRecord], or no assistant message last.
func Messages(chunks []session.Chunk, policy Redacted) ([]Message, string) {
	dropCalls, redacted := droppedCalls(chunks)
	if redacted && policy != DropChunk {
		return nil, skipRedacted
	}
	out := convert(chunks, dropCalls)
	if len(out) == 0 || out[len(out)-1].Role != "assistant" {
		return nil, skipNoReply
	}
	return out, ""
}

// convert maps chunks to messages, leaving out redacted and evidence
// chunks and the tool calls (and results) in dropCalls.
func convert(chunks []session.Chunk, dropCalls map[string]bool) []Message {
	var out []Message
	for _, c := range chunks {
		if c.Redacted() || !c.ModelFacing() {
			continue
		}
		text := c.Text()
		switch c.Kind() {
		case session.KindSystem, session.KindSummary:
			out = append(out, Message{Role: "system", Content: &text})
		case session.KindUser:
			out = append(out, Message{Role: "user", Content: &text})
		case session.KindAssistant:
			m := Message{Role: "assistant"}
			for _, tc := range c.ToolCalls() {
				if !dropCalls[tc.ID] {
					m.ToolCalls = append(m.ToolCalls, tc)
				}
			}
			if text != "" || len(m.ToolCalls) == 0 {
				m.Content = &text
			}
			if text == "" && len(m.ToolCalls) == 0 && len(c.ToolCalls()) > 0 {
				continue // every call it made was dropped
			}
			out = append(out, m)
		case session.KindToolResult:
			r, _ := c.ToolResult()
			if dropCalls[r.ToolCallID] {
				continue
			}
			out = append(out, Message{Role: "tool", Content: &r.Content, ToolCallID: r.ToolCallID, Name: r.Name})
		}
	}
	return out
}

// OpenRathRecord is one trajectory in OpenRath's shape: the transcript's
// rows as OpenRath persists them (evidence rows included), without the
// redacted ones, and the provenance.
type OpenRathRecord struct {
	EpisodeID  string     `json:"episode_id"`
	Transcript []Row      `json:"transcript"`
	Usage      any        `json:"usage"`
	Provenance Provenance `json:"provenance"`
}

// Row is one transcript row.
type Row struct {
	Kind    session.Kind    `json:"kind"`
	Payload json.RawMessage `json:"payload"`
}

func openRathRecord(chunks []session.Chunk, policy Redacted, prov Provenance) OpenRathRecord {
	rows := make([]Row, 0, len(chunks))
	dropCalls, _ := droppedCalls(chunks)
	for _, c := range chunks {
		if c.Redacted() {
			continue
		}
		if r, ok := c.ToolResult(); ok && dropCalls[r.ToolCallID] {
			continue
		}
		if c.Kind() == session.KindAssistant && len(dropCalls) > 0 {
			var calls []session.ToolCall
			for _, tc := range c.ToolCalls() {
				if !dropCalls[tc.ID] {
					calls = append(calls, tc)
				}
			}
			if len(calls) != len(c.ToolCalls()) {
				nc := session.Assistant(c.Text(), calls...)
				if c.Text() == "" && len(calls) == 0 {
					continue
				}
				c = nc
			}
		}
		rows = append(rows, Row{Kind: c.Kind(), Payload: c.Payload()})
	}
	_ = policy // DropRecord records never get here
	return OpenRathRecord{EpisodeID: prov.VersionID.String(), Transcript: rows, Usage: prov.Usage, Provenance: prov}
}

// droppedCalls returns the tool-call ids a redaction removes (a redacted
// tool result's, a redacted assistant message's) and whether any chunk
// is redacted.
func droppedCalls(chunks []session.Chunk) (map[string]bool, bool) {
	drop := map[string]bool{}
	redacted := false
	for _, c := range chunks {
		if !c.Redacted() {
			continue
		}
		redacted = true
		if r, ok := c.ToolResult(); ok {
			drop[r.ToolCallID] = true
		}
		for _, tc := range c.ToolCalls() {
			drop[tc.ID] = true
		}
	}
	return drop, redacted
}
