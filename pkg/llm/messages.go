package llm

import (
	"encoding/json"

	"github.com/rath-run/rath/pkg/session"
)

// MessagesFromChunks maps a transcript to chat messages as OpenRath does
// (its §2.7 table):
//
//   - system, user → a message of that role with the chunk's content;
//   - assistant → role assistant with its content and tool calls (content
//     "" for a tool-call-only reply);
//   - tool_result → role tool with tool_call_id and the JSON body as
//     content; the tool's name is not sent;
//   - summary → role user with the summary text (the "content" string of
//     its payload, or the whole payload when it has none), because
//     OpenRath's compressor writes its summary as a user row and the model
//     should see a compressed session as OpenRath's users know it;
//   - evidence kinds (memory_recall, selector_decision, approval, note) are
//     records for people and are skipped. Memory meant for the model enters
//     the transcript as ordinary system or user chunks.
//
// Zero chunks are skipped. The result shares nothing with the chunks.
func MessagesFromChunks(chunks []session.Chunk) []Message {
	msgs := make([]Message, 0, len(chunks))
	for _, c := range chunks {
		switch c.Kind() {
		case session.KindSystem:
			msgs = append(msgs, Message{Role: RoleSystem, Content: c.Text()})
		case session.KindUser:
			msgs = append(msgs, Message{Role: RoleUser, Content: c.Text()})
		case session.KindAssistant:
			msgs = append(msgs, Message{Role: RoleAssistant, Content: c.Text(), ToolCalls: c.ToolCalls()})
		case session.KindToolResult:
			r, _ := c.ToolResult()
			msgs = append(msgs, Message{Role: RoleTool, Content: r.Content, ToolCallID: r.ToolCallID})
		case session.KindSummary:
			msgs = append(msgs, Message{Role: RoleUser, Content: summaryText(c)})
		}
	}
	return msgs
}

// summaryText is a summary chunk's "content" string, or its whole payload.
func summaryText(c session.Chunk) string {
	var p struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(c.Payload(), &p); err == nil && p.Content != nil {
		return *p.Content
	}
	return string(c.Payload())
}
