package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"
	"unicode"

	"sigs.k8s.io/yaml"

	"github.com/rath-run/rath/pkg/session"
)

// ScriptedModel is the model name the scripted model reports.
const ScriptedModel = "scripted"

// Limits on scripts.
const (
	// MaxScriptBytes bounds a script file.
	MaxScriptBytes = 16 << 20
	// MaxScriptDelay bounds one reply's simulated latency.
	MaxScriptDelay = 10 * time.Minute
)

// ScriptReply is one scripted model reply.
//
// In JSON or YAML a reply is an object with the fields below, or a plain
// string as shorthand for {"content": …}. A tool call's id may be left out
// (the scripted model then uses "call_<reply>_<call>") and its type must be
// "function" or empty; its arguments may be written as a JSON string, as
// OpenAI sends them, or as a JSON/YAML value, which is encoded to a string.
// Unknown fields are refused, so a misspelled field is an error, not a
// silently empty reply.
type ScriptReply struct {
	Content   string             `json:"content,omitempty"`
	ToolCalls []session.ToolCall `json:"tool_calls,omitempty"`
	// DelayMS is simulated latency in milliseconds; the wait ends early,
	// with an error, when the context is done.
	DelayMS int `json:"delay_ms,omitempty"`
	// DelayJitterMS spreads the latency: each call waits a duration drawn
	// uniformly from DelayMS−DelayJitterMS to DelayMS+DelayJitterMS. It is
	// at most DelayMS. Real models' latencies vary; a fixed one keeps
	// sessions that started together in step with each other.
	DelayJitterMS int `json:"delay_jitter_ms,omitempty"`
}

// scriptReplyJSON is ScriptReply as written in scripts.
type scriptReplyJSON struct {
	Content       string           `json:"content"`
	ToolCalls     []scriptCallJSON `json:"tool_calls"`
	DelayMS       int              `json:"delay_ms"`
	DelayJitterMS int              `json:"delay_jitter_ms"`
}

type scriptCallJSON struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// UnmarshalJSON decodes a reply object or a string shorthand, strictly.
func (r *ScriptReply) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*r = ScriptReply{Content: s}
		return nil
	}
	if len(b) == 0 || b[0] != '{' {
		return errors.New("a reply must be an object or a string")
	}
	var j scriptReplyJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return err
	}
	out := ScriptReply{Content: j.Content, DelayMS: j.DelayMS, DelayJitterMS: j.DelayJitterMS}
	for i, c := range j.ToolCalls {
		args := ""
		if a := bytes.TrimSpace(c.Function.Arguments); len(a) > 0 && !bytes.Equal(a, []byte("null")) {
			if a[0] == '"' {
				if err := json.Unmarshal(a, &args); err != nil {
					return fmt.Errorf("tool_calls[%d].function.arguments: %w", i, err)
				}
			} else {
				var buf bytes.Buffer
				if err := json.Compact(&buf, a); err != nil {
					return fmt.Errorf("tool_calls[%d].function.arguments: %w", i, err)
				}
				args = buf.String()
			}
		}
		out.ToolCalls = append(out.ToolCalls, session.ToolCall{
			ID: c.ID, Type: c.Type,
			Function: session.FunctionCall{Name: c.Function.Name, Arguments: args},
		})
	}
	if err := out.validate(); err != nil {
		return err
	}
	*r = out
	return nil
}

// validate checks what a reply needs to become a valid assistant chunk.
func (r ScriptReply) validate() error {
	if r.DelayMS < 0 || time.Duration(r.DelayMS)*time.Millisecond > MaxScriptDelay {
		return fmt.Errorf("delay_ms %d is outside 0..%d", r.DelayMS, MaxScriptDelay.Milliseconds())
	}
	if r.DelayJitterMS < 0 || r.DelayJitterMS > r.DelayMS {
		return fmt.Errorf("delay_jitter_ms %d is outside 0..delay_ms (%d)", r.DelayJitterMS, r.DelayMS)
	}
	if time.Duration(r.DelayMS+r.DelayJitterMS)*time.Millisecond > MaxScriptDelay {
		return fmt.Errorf("delay_ms %d + delay_jitter_ms %d is over %d", r.DelayMS, r.DelayJitterMS, MaxScriptDelay.Milliseconds())
	}
	for i, c := range r.ToolCalls {
		if strings.TrimSpace(c.Function.Name) == "" {
			return fmt.Errorf("tool_calls[%d]: function.name is required", i)
		}
		if c.Type != "" && c.Type != "function" {
			return fmt.Errorf("tool_calls[%d]: type %q is not \"function\"", i, c.Type)
		}
	}
	return nil
}

// delay returns one call's latency: DelayMS, moved by a draw of intn (as
// rand.Int64N) within ±DelayJitterMS. A reply validate accepted keeps it
// within 0..MaxScriptDelay.
func (r ScriptReply) delay(intn func(int64) int64) time.Duration {
	d := time.Duration(r.DelayMS) * time.Millisecond
	if r.DelayJitterMS <= 0 {
		return d
	}
	j := time.Duration(r.DelayJitterMS) * time.Millisecond
	return d - j + time.Duration(intn(int64(2*j)+1))
}

// LoadScript reads a script: a YAML or JSON list of replies (see
// [ScriptReply]). Errors name the file and the entry (counting from 0).
// Files over [MaxScriptBytes] are refused.
func LoadScript(path string) ([]ScriptReply, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load script: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > MaxScriptBytes {
		return nil, fmt.Errorf("load script %s: %d bytes, limit %d", path, st.Size(), MaxScriptBytes)
	}
	data, err := readLimited(f, MaxScriptBytes)
	if err != nil {
		return nil, fmt.Errorf("load script %s: %w", path, err)
	}
	replies, err := ParseScript(data)
	if err != nil {
		return nil, fmt.Errorf("load script %s: %w", path, err)
	}
	return replies, nil
}

// ParseScript parses a script held in memory; see [LoadScript].
func ParseScript(data []byte) ([]ScriptReply, error) {
	if len(data) > MaxScriptBytes {
		return nil, fmt.Errorf("script is %d bytes, limit %d", len(data), MaxScriptBytes)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("not YAML or JSON: %w", err)
	}
	js = bytes.TrimSpace(js)
	if bytes.Equal(js, []byte("null")) {
		return nil, errors.New("script is empty: want a list of replies")
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(js, &entries); err != nil {
		return nil, errors.New("script must be a list of replies")
	}
	replies := make([]ScriptReply, len(entries))
	for i, e := range entries {
		if err := json.Unmarshal(e, &replies[i]); err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
	}
	return replies, nil
}

// Scripted is the offline model used by tests, tutorials and `make demo`:
// it answers from a script and never touches the network.
//
// The reply for a request is Replies[n], where n is the number of assistant
// messages already in the request. A request is therefore answered the same
// way however often it is sent: a retried call, or a step redelivered after
// a crash, gets the reply the first attempt got, and a transcript that
// already holds every scripted reply gets [ErrScriptExhausted].
//
// Usage is deterministic: prompt tokens are the number of whitespace
// separated words in the request's message contents, tool call names and
// arguments; completion tokens count the reply the same way.
//
// Tool calls without an id get "call_<n>_<i>" (reply n, call i), so ids are
// stable too. A Scripted is safe for concurrent use; it must not be modified
// while in use.
type Scripted struct {
	Replies []ScriptReply
}

// Chat returns the scripted reply for req.
func (s *Scripted) Chat(ctx context.Context, req Request) (Response, error) {
	return s.ChatStream(ctx, req, nil)
}

// ChatStream returns the scripted reply for req, passing its content to
// onDelta word by word (each delta is a word with the whitespace before it),
// after the reply's delay.
func (s *Scripted) ChatStream(ctx context.Context, req Request, onDelta func(string)) (Response, error) {
	const op = "scripted chat"
	n := 0
	for _, m := range req.Messages {
		if m.Role == RoleAssistant {
			n++
		}
	}
	if n >= len(s.Replies) {
		return Response{}, &Error{Op: op, cause: ErrScriptExhausted, Message: fmt.Sprintf(
			"%v: the request has %d assistant messages, so it needs reply %d, and the script has %d",
			ErrScriptExhausted, n, n, len(s.Replies))}
	}
	r := s.Replies[n]
	if err := r.validate(); err != nil {
		return Response{}, permanentf(op, "script entry %d: %v", n, err)
	}
	if d := r.delay(rand.Int64N); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return Response{}, ctxError(ctx, op, 1)
		case <-t.C:
		}
	} else if err := ctx.Err(); err != nil {
		return Response{}, ctxError(ctx, op, 1)
	}
	calls := make([]session.ToolCall, len(r.ToolCalls))
	for i, c := range r.ToolCalls {
		if c.ID == "" {
			c.ID = fmt.Sprintf("call_%d_%d", n, i)
		}
		if c.Type == "" {
			c.Type = "function"
		}
		calls[i] = c
	}
	if onDelta != nil {
		for _, w := range splitWords(r.Content) {
			onDelta(w)
		}
	}
	prompt := 0
	for _, m := range req.Messages {
		prompt += countWords(m.Content)
		for _, c := range m.ToolCalls {
			prompt += countWords(c.Function.Name) + countWords(c.Function.Arguments)
		}
	}
	completion := countWords(r.Content)
	for _, c := range calls {
		completion += countWords(c.Function.Name) + countWords(c.Function.Arguments)
	}
	finish := FinishStop
	if len(calls) > 0 {
		finish = FinishToolCalls
	} else {
		calls = nil
	}
	return Response{
		Content:   r.Content,
		ToolCalls: calls,
		Usage: session.Usage{
			PromptTokens:     int64(prompt),
			CompletionTokens: int64(completion),
			TotalTokens:      int64(prompt + completion),
		},
		Model:        ScriptedModel,
		FinishReason: finish,
	}, nil
}

func countWords(s string) int { return len(strings.Fields(s)) }

// splitWords splits s into words, each with the whitespace before it; the
// last piece also carries trailing whitespace. The pieces concatenate to s.
func splitWords(s string) []string {
	var out []string
	start := 0
	inWord := false
	for i, r := range s {
		space := unicode.IsSpace(r)
		if space && inWord {
			// A word ended: everything since start is one piece, unless
			// it is the first word and we keep leading space with it.
			out = append(out, s[start:i])
			start = i
		}
		inWord = !space
	}
	if start < len(s) {
		if len(out) > 0 && strings.TrimSpace(s[start:]) == "" {
			out[len(out)-1] += s[start:]
		} else {
			out = append(out, s[start:])
		}
	}
	return out
}
