// Package llmtest provides a fake OpenAI-compatible chat completions server
// for tests: an [httptest.Server] that speaks the real wire format of
// POST …/chat/completions, both as one JSON body and as a `stream: true`
// server-sent event stream (`data: {…}` chunks, tool calls split across
// chunks, usage in a final chunk when stream_options.include_usage is set,
// then `data: [DONE]`).
//
// Replies come from a queue ([Server.Enqueue]) or, when the queue is empty,
// from a function ([Server.Handle]); each [Reply] may instead inject a fault:
// an error status with Retry-After, a malformed body, a delay, or a dropped
// connection (before the reply, or part-way through a stream). The server
// records every request it receives ([Server.Requests]) so tests can assert
// on the messages, tools, parameters and headers a client sent.
//
// The server accepts any path ending in /chat/completions, so Azure
// deployment URLs work too. With no reply queued and no handler it answers
// 400 with error type "llmtest_no_reply". It is safe for concurrent use.
package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rath-run/rath/pkg/session"
)

// Reply is one scripted answer, or a fault.
type Reply struct {
	Content   string
	ToolCalls []session.ToolCall
	Refusal   string
	// FinishReason defaults to tool_calls when there are tool calls, else
	// stop. "-" sends a null finish reason.
	FinishReason string
	Usage        session.Usage
	// Model defaults to the requested model.
	Model string

	// Status, when not 0 or 200, sends an OpenAI error body
	// {"error":{"message","type","code"}} with ErrorMessage, ErrorType and
	// ErrorCode (defaults derived from the status).
	Status       int
	ErrorMessage string
	ErrorType    string
	ErrorCode    string
	// Header is added to the response, e.g. {"Retry-After": {"1"}}.
	Header http.Header
	// Body, when set, is sent verbatim (with Status, default 200) instead
	// of a generated body: use it for malformed replies.
	Body string
	// Delay is waited before anything is sent.
	Delay time.Duration
	// Drop closes the connection without sending a response.
	Drop bool
	// DropAfter, for streams, closes the connection after this many data
	// chunks have been sent (0: never).
	DropAfter int
	// ChunkDelay is waited between stream chunks.
	ChunkDelay time.Duration
}

// Request is one request the server received.
type Request struct {
	Method   string
	Path     string
	RawQuery string
	Header   http.Header
	// Body is the raw request body; JSON is it decoded (nil if it was not
	// a JSON object).
	Body []byte
	JSON map[string]any
	// Decoded fields, for convenience.
	Model    string
	Stream   bool
	Messages []Message
	Tools    []Tool
}

// Message is a chat message as received.
type Message struct {
	Role string `json:"role"`
	// Content is nil when the field was absent or null.
	Content    *string            `json:"content"`
	ToolCalls  []session.ToolCall `json:"tool_calls"`
	ToolCallID string             `json:"tool_call_id"`
	Name       string             `json:"name"`
}

// Tool is a tool definition as received.
type Tool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// Server is the fake endpoint.
type Server struct {
	srv  *httptest.Server
	done chan struct{}
	once sync.Once

	mu      sync.Mutex // guards following
	queue   []Reply
	handler func(Request) Reply
	reqs    []Request
	seq     int
}

// NewServer starts a server and closes it when the test ends.
func NewServer(tb testing.TB) *Server {
	s := &Server{done: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	tb.Cleanup(s.Close)
	return s
}

// URL returns the API root to configure clients with: the server's URL
// followed by /v1.
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// BaseURL returns the server's URL without /v1 (for Azure endpoints).
func (s *Server) BaseURL() string { return s.srv.URL }

// Enqueue appends replies to the queue; each request takes the next one.
func (s *Server) Enqueue(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, replies...)
}

// Handle sets the function that answers requests when the queue is empty.
// It may be called concurrently.
func (s *Server) Handle(f func(Request) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handler = f
}

// Requests returns the requests received so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Close stops the server, cutting short any delays. It is idempotent.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.done)
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := Request{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone(), Body: body}
	if err := json.Unmarshal(body, &req.JSON); err == nil {
		var d struct {
			Model    string    `json:"model"`
			Stream   bool      `json:"stream"`
			Messages []Message `json:"messages"`
			Tools    []Tool    `json:"tools"`
		}
		_ = json.Unmarshal(body, &d)
		req.Model, req.Stream, req.Messages, req.Tools = d.Model, d.Stream, d.Messages, d.Tools
	}

	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.seq++
	id := fmt.Sprintf("chatcmpl-llmtest-%d", s.seq)
	var reply Reply
	var ok bool
	switch {
	case len(s.queue) > 0:
		reply, s.queue, ok = s.queue[0], s.queue[1:], true
	case s.handler != nil:
		h := s.handler
		s.mu.Unlock()
		reply, ok = h(req), true
		s.mu.Lock()
	}
	s.mu.Unlock()

	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		writeError(w, Reply{Status: http.StatusNotFound, ErrorMessage: "llmtest serves POST …/chat/completions only"})
		return
	}
	if !ok {
		writeError(w, Reply{Status: http.StatusBadRequest, ErrorType: "llmtest_no_reply", ErrorMessage: "llmtest: no reply queued and no handler set"})
		return
	}
	if !s.wait(r, reply.Delay) {
		return
	}
	if reply.Drop {
		drop(w)
		return
	}
	for k, vs := range reply.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if reply.Body != "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(max(reply.Status, http.StatusOK))
		_, _ = io.WriteString(w, reply.Body)
		return
	}
	if reply.Status != 0 && reply.Status != http.StatusOK {
		writeError(w, reply)
		return
	}
	if reply.Model == "" {
		reply.Model = req.Model
	}
	if req.Stream {
		includeUsage := false
		if so, ok := req.JSON["stream_options"].(map[string]any); ok {
			includeUsage, _ = so["include_usage"].(bool)
		}
		s.stream(w, r, id, reply, includeUsage)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(completion(id, reply))
}

// wait sleeps d unless the request or the server ends first.
func (s *Server) wait(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
	case <-s.done:
	}
	return false
}

func drop(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // closes the connection without a reply
	}
	_ = conn.Close()
}

func writeError(w http.ResponseWriter, r Reply) {
	typ, msg := r.ErrorType, r.ErrorMessage
	if typ == "" {
		switch {
		case r.Status == http.StatusTooManyRequests:
			typ = "rate_limit_error"
		case r.Status >= 500:
			typ = "server_error"
		default:
			typ = "invalid_request_error"
		}
	}
	if msg == "" {
		msg = http.StatusText(r.Status)
	}
	var code any
	if r.ErrorCode != "" {
		code = r.ErrorCode
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(r.Status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": code, "param": nil}})
}

func finishReason(r Reply) any {
	switch r.FinishReason {
	case "-":
		return nil
	case "":
		if len(r.ToolCalls) > 0 {
			return "tool_calls"
		}
		return "stop"
	}
	return r.FinishReason
}

func usageJSON(u session.Usage) map[string]any {
	total := u.TotalTokens
	if total == 0 {
		total = u.PromptTokens + u.CompletionTokens
	}
	return map[string]any{"prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens, "total_tokens": total}
}

func toolCallsJSON(calls []session.ToolCall) []map[string]any {
	out := make([]map[string]any, len(calls))
	for i, c := range calls {
		typ := c.Type
		if typ == "" {
			typ = "function"
		}
		out[i] = map[string]any{"id": c.ID, "type": typ, "function": map[string]any{"name": c.Function.Name, "arguments": c.Function.Arguments}}
	}
	return out
}

func completion(id string, r Reply) map[string]any {
	msg := map[string]any{"role": "assistant", "content": nil}
	if r.Content != "" || len(r.ToolCalls) == 0 {
		msg["content"] = r.Content
	}
	if len(r.ToolCalls) > 0 {
		msg["tool_calls"] = toolCallsJSON(r.ToolCalls)
	}
	if r.Refusal != "" {
		msg["refusal"] = r.Refusal
	}
	return map[string]any{
		"id": id, "object": "chat.completion", "created": time.Now().Unix(), "model": r.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finishReason(r), "logprobs": nil}},
		"usage":   usageJSON(r.Usage),
	}
}

// stream writes the reply as server-sent events.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, id string, reply Reply, includeUsage bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	created := time.Now().Unix()
	sent := 0
	send := func(choices []any, usage any) bool {
		if reply.DropAfter > 0 && sent == reply.DropAfter {
			_ = rc.Flush()
			drop(w)
			return false
		}
		if sent > 0 && !s.wait(r, reply.ChunkDelay) {
			return false
		}
		ev := map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": reply.Model, "choices": choices}
		if includeUsage {
			ev["usage"] = usage
		}
		b, _ := json.Marshal(ev)
		var buf bytes.Buffer
		buf.WriteString("data: ")
		buf.Write(b)
		buf.WriteString("\n\n")
		if _, err := w.Write(buf.Bytes()); err != nil {
			return false
		}
		sent++
		return rc.Flush() == nil
	}
	delta := func(d map[string]any) []any {
		return []any{map[string]any{"index": 0, "delta": d, "finish_reason": nil, "logprobs": nil}}
	}
	if !send(delta(map[string]any{"role": "assistant", "content": ""}), nil) {
		return
	}
	for _, piece := range words(reply.Content) {
		if !send(delta(map[string]any{"content": piece}), nil) {
			return
		}
	}
	if reply.Refusal != "" && !send(delta(map[string]any{"refusal": reply.Refusal}), nil) {
		return
	}
	for i, c := range toolCallsJSON(reply.ToolCalls) {
		fn := c["function"].(map[string]any)
		args := fn["arguments"].(string)
		head := map[string]any{"index": i, "id": c["id"], "type": c["type"], "function": map[string]any{"name": fn["name"], "arguments": ""}}
		if !send(delta(map[string]any{"tool_calls": []any{head}}), nil) {
			return
		}
		for _, part := range halves(args) {
			frag := map[string]any{"index": i, "function": map[string]any{"arguments": part}}
			if !send(delta(map[string]any{"tool_calls": []any{frag}}), nil) {
				return
			}
		}
	}
	last := []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finishReason(reply), "logprobs": nil}}
	if !send(last, nil) {
		return
	}
	if includeUsage && !send([]any{}, usageJSON(reply.Usage)) {
		return
	}
	if reply.DropAfter > 0 && sent == reply.DropAfter {
		drop(w)
		return
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
	_ = rc.Flush()
}

// words splits s into words, each with the whitespace before it.
func words(s string) []string {
	var out []string
	start := 0
	inWord := false
	for i, r := range s {
		space := unicode.IsSpace(r)
		if space && inWord {
			out = append(out, s[start:i])
			start = i
		}
		inWord = !space
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// halves splits s in two on a rune boundary (one piece if s is short).
func halves(s string) []string {
	if len(s) < 2 {
		return []string{s}
	}
	mid := len(s) / 2
	for mid > 0 && !utf8.RuneStart(s[mid]) {
		mid--
	}
	if mid == 0 {
		return []string{s}
	}
	return []string{s[:mid], s[mid:]}
}
