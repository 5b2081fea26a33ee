package trainset

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxLineBytes bounds one record line read by [ReadOpenAI].
const MaxLineBytes = 64 << 20

// ReadOpenAI reads OpenAI fine-tuning chat JSONL strictly and calls fn with
// every record. Besides strict decoding (no unknown fields), it enforces
// the format's rules for supervised examples: at least one message; roles
// system, user, assistant or tool; the first message a system or user one;
// system, user and tool messages with string content; an assistant message
// with content or tool calls; tool-call ids unique and each one answered
// by exactly one tool message right after its assistant message (and no
// tool message answering anything else); the last message an assistant's.
// Errors name the line and the message index.
func ReadOpenAI(r io.Reader, fn func(OpenAIRecord) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		line, err := readLine(br)
		if errors.Is(err, io.EOF) && len(line) == 0 {
			return nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("line %d: %w", n, err)
		}
		var rec OpenAIRecord
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if derr := dec.Decode(&rec); derr != nil {
			return fmt.Errorf("line %d: %w", n, derr)
		}
		if dec.More() {
			return fmt.Errorf("line %d: more than one JSON value", n)
		}
		if verr := CheckOpenAI(rec.Messages); verr != nil {
			return fmt.Errorf("line %d: %w", n, verr)
		}
		if ferr := fn(rec); ferr != nil {
			return ferr
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
	}
}

func readLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		part, err := br.ReadSlice('\n')
		buf = append(buf, part...)
		if len(buf) > MaxLineBytes {
			return nil, fmt.Errorf("line longer than %d bytes", MaxLineBytes)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimRight(buf, "\r\n"), err
	}
}

// CheckOpenAI checks a message list against the rules [ReadOpenAI] lists.
func CheckOpenAI(msgs []Message) error {
	if len(msgs) == 0 {
		return errors.New("messages: empty")
	}
	if r := msgs[0].Role; r != "system" && r != "user" {
		return fmt.Errorf("messages[0]: role %q: the first message must be system or user", r)
	}
	seen := map[string]bool{}
	pending := map[string]bool{} // calls of the last assistant message not yet answered
	for i, m := range msgs {
		if m.Role != "tool" && len(pending) > 0 {
			return fmt.Errorf("messages[%d]: role %q before every tool call of the assistant message was answered (%d left)", i, m.Role, len(pending))
		}
		switch m.Role {
		case "system", "user":
			if m.Content == nil || len(m.ToolCalls) > 0 || m.ToolCallID != "" {
				return fmt.Errorf("messages[%d]: a %s message has string content and nothing else", i, m.Role)
			}
		case "assistant":
			if m.Content == nil && len(m.ToolCalls) == 0 {
				return fmt.Errorf("messages[%d]: an assistant message needs content or tool_calls", i)
			}
			if m.ToolCallID != "" {
				return fmt.Errorf("messages[%d]: an assistant message has no tool_call_id", i)
			}
			for j, tc := range m.ToolCalls {
				switch {
				case tc.ID == "":
					return fmt.Errorf("messages[%d].tool_calls[%d]: id is empty", i, j)
				case seen[tc.ID]:
					return fmt.Errorf("messages[%d].tool_calls[%d]: id %q used twice", i, j, tc.ID)
				case tc.Type != "function":
					return fmt.Errorf("messages[%d].tool_calls[%d]: type %q: want \"function\"", i, j, tc.Type)
				case tc.Function.Name == "":
					return fmt.Errorf("messages[%d].tool_calls[%d]: function name is empty", i, j)
				case !json.Valid([]byte(tc.Function.Arguments)):
					return fmt.Errorf("messages[%d].tool_calls[%d]: arguments are not JSON", i, j)
				}
				seen[tc.ID] = true
				pending[tc.ID] = true
			}
		case "tool":
			if m.Content == nil || len(m.ToolCalls) > 0 {
				return fmt.Errorf("messages[%d]: a tool message has string content and no tool_calls", i)
			}
			if !pending[m.ToolCallID] {
				return fmt.Errorf("messages[%d]: tool_call_id %q answers no open tool call of the assistant message before it", i, m.ToolCallID)
			}
			delete(pending, m.ToolCallID)
		default:
			return fmt.Errorf("messages[%d]: role %q: want system, user, assistant or tool", i, m.Role)
		}
	}
	if last := msgs[len(msgs)-1]; last.Role != "assistant" || len(last.ToolCalls) > 0 {
		return fmt.Errorf("messages[%d]: the last message must be an assistant reply without open tool calls", len(msgs)-1)
	}
	return nil
}
