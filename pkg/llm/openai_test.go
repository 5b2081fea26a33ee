package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/llm/llmtest"
	"github.com/rath-run/rath/pkg/session"
)

const testKey = "sk-test-SECRET-0123456789abcdef"

// newProvider returns a provider for srv with fast backoff.
func newProvider(t *testing.T, srv *llmtest.Server, mod func(*llm.OpenAIConfig)) *llm.OpenAI {
	t.Helper()
	cfg := llm.OpenAIConfig{
		BaseURL:   srv.URL(),
		APIKey:    testKey,
		Model:     "gpt-test",
		BaseDelay: time.Millisecond,
		MaxDelay:  20 * time.Second,
		Timeout:   10 * time.Second,
	}
	if mod != nil {
		mod(&cfg)
	}
	p, err := llm.NewOpenAI(cfg)
	if err != nil {
		t.Fatalf("NewOpenAI: %v", err)
	}
	return p
}

func userReq(text string) llm.Request {
	return llm.Request{Messages: []llm.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: text}}}
}

// call runs Chat or ChatStream, collecting deltas.
func call(ctx context.Context, p *llm.OpenAI, stream bool, req llm.Request) (llm.Response, []string, error) {
	if !stream {
		r, err := p.Chat(ctx, req)
		return r, nil, err
	}
	var deltas []string
	r, err := p.ChatStream(ctx, req, func(d string) { deltas = append(deltas, d) })
	return r, deltas, err
}

func TestOpenAIRoundTripText(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			t.Parallel()
			srv := llmtest.NewServer(t)
			want := "Kyoto in three days: temples, bamboo, and a market. 京都 ✓"
			srv.Enqueue(llmtest.Reply{Content: want, Usage: session.Usage{PromptTokens: 12, CompletionTokens: 9}, Model: "gpt-test-2026"})
			p := newProvider(t, srv, nil)
			resp, deltas, err := call(t.Context(), p, stream, userReq("plan a trip"))
			if err != nil {
				t.Fatalf("chat: %v", err)
			}
			if resp.Content != want {
				t.Errorf("content = %q, want %q", resp.Content, want)
			}
			if resp.FinishReason != llm.FinishStop || resp.Model != "gpt-test-2026" || len(resp.ToolCalls) != 0 {
				t.Errorf("finish %q model %q calls %v", resp.FinishReason, resp.Model, resp.ToolCalls)
			}
			if resp.Usage != (session.Usage{PromptTokens: 12, CompletionTokens: 9, TotalTokens: 21}) {
				t.Errorf("usage = %+v", resp.Usage)
			}
			if stream {
				if len(deltas) < 5 || strings.Join(deltas, "") != want {
					t.Errorf("deltas = %q, want several pieces joining to the content", deltas)
				}
			}
			reqs := srv.Requests()
			if len(reqs) != 1 {
				t.Fatalf("server saw %d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer "+testKey {
				t.Errorf("path %q auth %q", r.Path, r.Header.Get("Authorization"))
			}
			if r.Stream != stream || r.Model != "gpt-test" {
				t.Errorf("stream %v model %q", r.Stream, r.Model)
			}
			if stream {
				so, _ := r.JSON["stream_options"].(map[string]any)
				if so["include_usage"] != true {
					t.Errorf("stream_options = %v, want include_usage", r.JSON["stream_options"])
				}
			}
			if len(r.Messages) != 2 || r.Messages[0].Role != "system" || *r.Messages[1].Content != "plan a trip" {
				t.Errorf("messages = %+v", r.Messages)
			}
			c := resp.Chunk()
			if c.Kind() != session.KindAssistant || c.Text() != want {
				t.Errorf("chunk = %v", c)
			}
		})
	}
}

func TestOpenAIToolCalls(t *testing.T) {
	t.Parallel()
	calls := []session.ToolCall{
		{ID: "call_a", Type: "function", Function: session.FunctionCall{Name: "read_workspace_file", Arguments: `{"path":"hello.txt"}`}},
		{ID: "call_b", Type: "function", Function: session.FunctionCall{Name: "run_shell_command", Arguments: `{"cmd":"echo 你好 && ls -la"}`}},
	}
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			t.Parallel()
			srv := llmtest.NewServer(t)
			srv.Enqueue(llmtest.Reply{ToolCalls: calls, Usage: session.Usage{PromptTokens: 30, CompletionTokens: 20, TotalTokens: 50}})
			srv.Enqueue(llmtest.Reply{Content: "done"})
			p := newProvider(t, srv, nil)
			tools := []llm.Tool{
				{Name: "read_workspace_file", Description: "read a file", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
				{Name: "run_shell_command", Description: "run a command"},
			}
			req := userReq("look")
			req.Tools = tools
			resp, _, err := call(t.Context(), p, stream, req)
			if err != nil {
				t.Fatalf("chat: %v", err)
			}
			if resp.FinishReason != llm.FinishToolCalls || resp.Content != "" {
				t.Errorf("finish %q content %q", resp.FinishReason, resp.Content)
			}
			if fmt.Sprint(resp.ToolCalls) != fmt.Sprint(calls) {
				t.Errorf("tool calls = %+v, want %+v", resp.ToolCalls, calls)
			}
			if resp.Usage.TotalTokens != 50 {
				t.Errorf("usage = %+v", resp.Usage)
			}
			// The assistant chunk is valid and round-trips through NewChunk.
			c := resp.Chunk()
			if _, err := session.NewChunk(c.Kind(), c.Payload()); err != nil {
				t.Errorf("chunk does not round-trip: %v", err)
			}

			// Second round: the transcript goes back with the tool results.
			transcript := []session.Chunk{
				session.User("look"), c,
				session.ToolResultChunk(session.ToolResult{ToolCallID: "call_a", Name: "read_workspace_file", Content: `{"data":"hi"}`}),
				session.ToolResultChunk(session.ToolResult{ToolCallID: "call_b", Name: "run_shell_command", Content: `{"exit_code":0}`}),
			}
			req2 := llm.Request{Messages: llm.MessagesFromChunks(transcript), Tools: tools}
			if _, _, err := call(t.Context(), p, stream, req2); err != nil {
				t.Fatalf("second round: %v", err)
			}
			reqs := srv.Requests()
			if len(reqs) != 2 {
				t.Fatalf("server saw %d requests", len(reqs))
			}
			got := reqs[0].Tools
			if len(got) != 2 || got[0].Type != "function" || got[0].Function.Name != "read_workspace_file" ||
				!strings.Contains(string(got[0].Function.Parameters), `"required":["path"]`) {
				t.Errorf("tools sent = %+v", got)
			}
			if string(got[1].Function.Parameters) != `{"type":"object","properties":{}}` {
				t.Errorf("nil parameters sent as %s", got[1].Function.Parameters)
			}
			msgs := reqs[1].Messages
			if len(msgs) != 4 {
				t.Fatalf("second request messages = %+v", msgs)
			}
			if msgs[1].Role != "assistant" || msgs[1].Content != nil || fmt.Sprint(msgs[1].ToolCalls) != fmt.Sprint(calls) {
				t.Errorf("assistant message = %+v", msgs[1])
			}
			for i, id := range []string{"call_a", "call_b"} {
				m := msgs[2+i]
				if m.Role != "tool" || m.ToolCallID != id || m.Name != "" || m.Content == nil {
					t.Errorf("tool message %d = %+v", i, m)
				}
			}
			// content is present (null) for the tool-call-only assistant message.
			raw := reqs[1].JSON["messages"].([]any)[1].(map[string]any)
			if v, ok := raw["content"]; !ok || v != nil {
				t.Errorf("assistant content field = %v (present %v), want null", v, ok)
			}
		})
	}
}

func TestOpenAIParametersPassThrough(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	srv.Handle(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Content: "ok"} })
	p := newProvider(t, srv, nil)
	zero := float32(0)
	seed := 42
	no := false
	req := userReq("hi")
	req.Model = "other-model"
	req.Temperature = &zero
	req.MaxTokens = 77
	req.Seed = &seed
	req.ToolChoice = "required"
	req.ParallelToolCalls = &no
	req.ReasoningEffort = "low"
	req.Stop = []string{"END", "STOP"}
	req.ResponseFormat = json.RawMessage(`{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}}`)
	req.Extra = map[string]any{"top_k": 5, "chat_template_kwargs": map[string]any{"enable_thinking": false}, "user": "u-1"}
	req.Tools = []llm.Tool{{Name: "t"}}
	for _, stream := range []bool{false, true} {
		if _, _, err := call(t.Context(), p, stream, req); err != nil {
			t.Fatalf("stream=%v: %v", stream, err)
		}
	}
	req.ToolChoice = "t"
	req.Temperature = nil
	if _, err := p.Chat(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("server saw %d requests", len(reqs))
	}
	for i, r := range reqs[:2] {
		j := r.JSON
		checks := map[string]string{
			"model":                "\"other-model\"",
			"temperature":          "0",
			"max_tokens":           "77",
			"seed":                 "42",
			"tool_choice":          `"required"`,
			"parallel_tool_calls":  "false",
			"reasoning_effort":     `"low"`,
			"stop":                 `["END","STOP"]`,
			"response_format":      `{"json_schema":{"name":"x","schema":{"type":"object"}},"type":"json_schema"}`,
			"top_k":                "5",
			"chat_template_kwargs": `{"enable_thinking":false}`,
			"user":                 `"u-1"`,
		}
		for k, want := range checks {
			v, ok := j[k]
			if !ok {
				t.Errorf("request %d: %s missing", i, k)
				continue
			}
			b, _ := json.Marshal(v)
			if string(b) != want {
				t.Errorf("request %d: %s = %s, want %s", i, k, b, want)
			}
		}
	}
	j := reqs[2].JSON
	if _, ok := j["temperature"]; ok {
		t.Errorf("unset temperature was sent: %v", j["temperature"])
	}
	b, _ := json.Marshal(j["tool_choice"])
	if string(b) != `{"function":{"name":"t"},"type":"function"}` {
		t.Errorf("named tool_choice = %s", b)
	}
}

func TestOpenAIRetryAfterHonoured(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	srv.Enqueue(
		llmtest.Reply{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"1"}}},
		llmtest.Reply{Content: "after the wait"},
	)
	p := newProvider(t, srv, nil) // backoff alone would wait at most 1ms
	start := time.Now()
	resp, err := p.Chat(t.Context(), userReq("hi"))
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("chat: %v", err)
	}
	if resp.Content != "after the wait" {
		t.Errorf("content = %q", resp.Content)
	}
	if elapsed < time.Second {
		t.Errorf("retried after %s, want ≥ the 1s Retry-After", elapsed)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("server saw %d requests, want 2", n)
	}
}

func TestOpenAIRetryAfterHTTPDateAndStreaming(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	// An HTTP date has one-second resolution: 2s ahead waits at least 1s.
	date := time.Now().Add(2 * time.Second).UTC().Format(http.TimeFormat)
	srv.Enqueue(
		llmtest.Reply{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {date}}},
		llmtest.Reply{Content: "streamed after the wait"},
	)
	p := newProvider(t, srv, nil)
	start := time.Now()
	resp, deltas, err := call(t.Context(), p, true, userReq("hi"))
	if err != nil {
		t.Fatalf("chat: %v", err)
	}
	if elapsed := time.Since(start); elapsed < time.Second {
		t.Errorf("retried after %s, want ≥ 1s", elapsed)
	}
	if resp.Content != "streamed after the wait" || strings.Join(deltas, "") != resp.Content {
		t.Errorf("content %q deltas %q", resp.Content, deltas)
	}
}

func TestOpenAIRetryAfterBeyondMaxDelayReturns(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	srv.Enqueue(llmtest.Reply{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"3600"}}})
	p := newProvider(t, srv, func(c *llm.OpenAIConfig) { c.MaxDelay = time.Second })
	_, err := p.Chat(t.Context(), userReq("hi"))
	var e *llm.Error
	if !errors.As(err, &e) || !errors.Is(err, llm.ErrTransient) {
		t.Fatalf("err = %v, want a transient *llm.Error", err)
	}
	if e.RetryAfter != time.Hour || e.StatusCode != http.StatusTooManyRequests {
		t.Errorf("RetryAfter %s status %d", e.RetryAfter, e.StatusCode)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
}

func TestOpenAIServerErrorsRetried(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	srv.Enqueue(
		llmtest.Reply{Status: http.StatusInternalServerError},
		llmtest.Reply{Status: http.StatusBadGateway, Body: "<html>bad gateway</html>"},
		llmtest.Reply{Content: "third time"},
	)
	p := newProvider(t, srv, nil)
	resp, err := p.Chat(t.Context(), userReq("hi"))
	if err != nil || resp.Content != "third time" {
		t.Fatalf("resp %q err %v", resp.Content, err)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("server saw %d requests, want 3", n)
	}
}

func TestOpenAIRetriesExhausted(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	srv.Handle(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Status: http.StatusServiceUnavailable, ErrorMessage: "overloaded"}
	})
	p := newProvider(t, srv, func(c *llm.OpenAIConfig) { c.MaxAttempts = 3 })
	_, err := p.Chat(t.Context(), userReq("hi"))
	var e *llm.Error
	if !errors.As(err, &e) || !errors.Is(err, llm.ErrTransient) || errors.Is(err, llm.ErrPermanent) {
		t.Fatalf("err = %v, want transient only", err)
	}
	if e.Attempts != 3 || e.StatusCode != http.StatusServiceUnavailable || !strings.Contains(e.Error(), "overloaded") {
		t.Errorf("error = %+v", e)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("server saw %d requests, want 3", n)
	}
}

func TestOpenAIClientErrorNotRetried(t *testing.T) {
	t.Parallel()
	for _, status := range []int{400, 401, 403, 404, 422} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			srv := llmtest.NewServer(t)
			srv.Handle(func(llmtest.Request) llmtest.Reply {
				return llmtest.Reply{Status: status, ErrorMessage: "nope", ErrorCode: "bad_thing"}
			})
			p := newProvider(t, srv, nil)
			_, err := p.Chat(t.Context(), userReq("hi"))
			var e *llm.Error
			if !errors.As(err, &e) || !errors.Is(err, llm.ErrPermanent) || errors.Is(err, llm.ErrTransient) {
				t.Fatalf("err = %v, want permanent", err)
			}
			if e.StatusCode != status || e.Code != "bad_thing" || e.Message != "nope" {
				t.Errorf("error = %+v", e)
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("server saw %d requests, want exactly 1", n)
			}
		})
	}
}

func TestOpenAITimeoutPerCall(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	srv.Enqueue(llmtest.Reply{Content: "too late", Delay: time.Minute})
	p := newProvider(t, srv, func(c *llm.OpenAIConfig) { c.Timeout = 300 * time.Millisecond; c.MaxAttempts = 1 })
	start := time.Now()
	_, err := p.Chat(t.Context(), userReq("hi"))
	if !errors.Is(err, llm.ErrTransient) || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("err = %v, want a transient timeout", err)
	}
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("timeout took %s", elapsed)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a per-call timeout must not look like the caller's deadline: %v", err)
	}

	// With retries, a timed-out attempt is retried.
	srv2 := llmtest.NewServer(t)
	srv2.Enqueue(llmtest.Reply{Content: "slow", Delay: time.Minute}, llmtest.Reply{Content: "fast"})
	p2 := newProvider(t, srv2, func(c *llm.OpenAIConfig) { c.Timeout = 2 * time.Second })
	r, err := p2.Chat(t.Context(), userReq("hi"))
	if err != nil || r.Content != "fast" {
		t.Fatalf("retry after timeout: %q %v", r.Content, err)
	}
	if n := len(srv2.Requests()); n != 2 {
		t.Errorf("server saw %d requests, want 2", n)
	}
}

func TestOpenAIStreamTimeoutCoversBody(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	srv.Enqueue(llmtest.Reply{Content: "one two three four", ChunkDelay: time.Minute})
	p := newProvider(t, srv, func(c *llm.OpenAIConfig) { c.Timeout = 300 * time.Millisecond; c.MaxAttempts = 1 })
	_, _, err := call(t.Context(), p, true, userReq("hi"))
	if !errors.Is(err, llm.ErrTransient) {
		t.Fatalf("err = %v, want transient", err)
	}
}

func TestOpenAICallerCancel(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	srv.Handle(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Delay: time.Minute} })
	p := newProvider(t, srv, nil)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := p.Chat(ctx, userReq("hi"))
		errc <- err
	}()
	// Cancel once the server has the request.
	testenv.Eventually(t, 10*time.Second, "the server to see the request", func() bool { return len(srv.Requests()) > 0 })
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) || !errors.Is(err, llm.ErrTransient) {
			t.Fatalf("err = %v, want context.Canceled, transient", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Chat did not return after cancel")
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("server saw %d requests after cancel, want 1", n)
	}
}

func TestOpenAIDroppedConnection(t *testing.T) {
	t.Parallel()
	t.Run("before reply", func(t *testing.T) {
		t.Parallel()
		for _, stream := range []bool{false, true} {
			srv := llmtest.NewServer(t)
			srv.Enqueue(llmtest.Reply{Drop: true}, llmtest.Reply{Content: "second try"})
			p := newProvider(t, srv, nil)
			resp, _, err := call(t.Context(), p, stream, userReq("hi"))
			if err != nil || resp.Content != "second try" {
				t.Fatalf("stream=%v: %q %v", stream, resp.Content, err)
			}
			if n := len(srv.Requests()); n != 2 {
				t.Errorf("stream=%v: server saw %d requests, want 2", stream, n)
			}
		}
	})
	t.Run("mid stream after text", func(t *testing.T) {
		t.Parallel()
		srv := llmtest.NewServer(t)
		srv.Enqueue(llmtest.Reply{Content: "one two three four five", DropAfter: 3}, llmtest.Reply{Content: "never"})
		p := newProvider(t, srv, nil)
		_, deltas, err := call(t.Context(), p, true, userReq("hi"))
		if !errors.Is(err, llm.ErrTransient) {
			t.Fatalf("err = %v, want transient", err)
		}
		if len(deltas) == 0 {
			t.Errorf("no deltas before the drop")
		}
		if n := len(srv.Requests()); n != 1 {
			t.Errorf("server saw %d requests; text was already passed on, so no retry", n)
		}
	})
	t.Run("mid stream, no listener", func(t *testing.T) {
		t.Parallel()
		srv := llmtest.NewServer(t)
		srv.Enqueue(llmtest.Reply{Content: "one two three four five", DropAfter: 3}, llmtest.Reply{Content: "whole"})
		p := newProvider(t, srv, nil)
		resp, err := p.ChatStream(t.Context(), userReq("hi"), nil)
		if err != nil || resp.Content != "whole" {
			t.Fatalf("%q %v", resp.Content, err)
		}
	})
}

func TestOpenAIMalformedReplies(t *testing.T) {
	t.Parallel()
	cases := map[string]llmtest.Reply{
		"not json":   {Body: `{"id": "x", "choices": [`},
		"no choices": {Body: `{"id":"x","object":"chat.completion","model":"m","choices":[]}`},
		"wrong type": {Body: `{"id":"x","choices":"many"}`},
	}
	for name, bad := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := llmtest.NewServer(t)
			srv.Enqueue(bad, llmtest.Reply{Content: "fine"})
			p := newProvider(t, srv, nil)
			resp, err := p.Chat(t.Context(), userReq("hi"))
			if err != nil || resp.Content != "fine" {
				t.Fatalf("%q %v", resp.Content, err)
			}
			srv.Enqueue(bad)
			p1 := newProvider(t, srv, func(c *llm.OpenAIConfig) { c.MaxAttempts = 1 })
			_, err = p1.Chat(t.Context(), userReq("hi"))
			if !errors.Is(err, llm.ErrTransient) {
				t.Errorf("err = %v, want transient", err)
			}
		})
	}
	t.Run("stream without finish", func(t *testing.T) {
		t.Parallel()
		srv := llmtest.NewServer(t)
		srv.Enqueue(llmtest.Reply{Body: "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hal\"}}]}\n\ndata: [DONE]\n\n"})
		p := newProvider(t, srv, func(c *llm.OpenAIConfig) { c.MaxAttempts = 1 })
		_, err := p.ChatStream(t.Context(), userReq("hi"), nil)
		if !errors.Is(err, llm.ErrTransient) || !strings.Contains(err.Error(), "finish reason") {
			t.Errorf("err = %v, want transient truncated stream", err)
		}
	})
}

func TestOpenAIAPIKeyNeverInErrors(t *testing.T) {
	t.Parallel()
	echo := func(r llmtest.Request) string {
		return "you sent " + r.Header.Get("Authorization") + " with " + string(r.Body)
	}
	cases := map[string]func(llmtest.Request) llmtest.Reply{
		"json 401": func(r llmtest.Request) llmtest.Reply {
			return llmtest.Reply{Status: 401, ErrorMessage: echo(r), ErrorCode: testKey}
		},
		"html 400": func(r llmtest.Request) llmtest.Reply {
			return llmtest.Reply{Status: 400, Body: "<pre>" + strings.Repeat("x", 490) + echo(r) + "</pre>"}
		},
		"json 500 exhausted": func(r llmtest.Request) llmtest.Reply {
			return llmtest.Reply{Status: 500, ErrorMessage: echo(r), ErrorType: "server " + testKey}
		},
		"200 garbage": func(r llmtest.Request) llmtest.Reply {
			return llmtest.Reply{Body: "{" + echo(r)}
		},
	}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, stream := range []bool{false, true} {
				srv := llmtest.NewServer(t)
				srv.Handle(h)
				p := newProvider(t, srv, func(c *llm.OpenAIConfig) { c.MaxAttempts = 2 })
				req := userReq("my key is " + testKey) // the key even in the body
				_, _, err := call(t.Context(), p, stream, req)
				if err == nil {
					t.Fatal("want an error")
				}
				for e := err; e != nil; e = errors.Unwrap(e) {
					for _, s := range []string{e.Error(), fmt.Sprintf("%+v", e), fmt.Sprintf("%#v", e)} {
						if strings.Contains(s, testKey) || strings.Contains(s, "SECRET") {
							t.Fatalf("stream=%v: the API key leaked: %s", stream, s)
						}
					}
				}
				var le *llm.Error
				if !errors.As(err, &le) {
					t.Fatalf("not an *llm.Error: %v", err)
				}
			}
		})
	}
}

func TestOpenAIAzure(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	srv.Enqueue(llmtest.Reply{Content: "from azure"})
	p, err := llm.NewOpenAI(llm.OpenAIConfig{BaseURL: srv.BaseURL(), APIKey: testKey, Model: "my-gpt4o-deploy", Azure: true, APIVersion: "2024-10-21"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := p.Chat(t.Context(), userReq("hi"))
	if err != nil || resp.Content != "from azure" {
		t.Fatalf("%q %v", resp.Content, err)
	}
	r := srv.Requests()[0]
	if r.Path != "/openai/deployments/my-gpt4o-deploy/chat/completions" || r.RawQuery != "api-version=2024-10-21" {
		t.Errorf("path %q query %q", r.Path, r.RawQuery)
	}
	if r.Header.Get("api-key") != testKey || r.Header.Get("Authorization") != "" {
		t.Errorf("auth headers: api-key %q authorization %q", r.Header.Get("api-key"), r.Header.Get("Authorization"))
	}
}

func TestOpenAINormalisesReplies(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	p := newProvider(t, srv, nil)
	srv.Enqueue(llmtest.Reply{Content: "odd", FinishReason: "eos_token"})
	if r, err := p.Chat(t.Context(), userReq("hi")); err != nil || r.FinishReason != llm.FinishStop {
		t.Errorf("unknown finish reason: %q %v", r.FinishReason, err)
	}
	calls := []session.ToolCall{{Function: session.FunctionCall{Name: "", Arguments: "{}"}}, {Function: session.FunctionCall{Name: "x", Arguments: `{"a":1}`}}}
	p1 := newProvider(t, srv, func(c *llm.OpenAIConfig) { c.MaxAttempts = 1 })
	for _, stream := range []bool{false, true} {
		srv.Enqueue(llmtest.Reply{ToolCalls: calls, FinishReason: "-"})
		r, _, err := call(t.Context(), p1, stream, userReq("hi"))
		if err != nil && stream {
			// A stream with a null finish reason is a truncated stream.
			if !errors.Is(err, llm.ErrTransient) {
				t.Errorf("stream null finish: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if r.FinishReason != llm.FinishToolCalls || len(r.ToolCalls) != 2 {
			t.Fatalf("finish %q calls %+v", r.FinishReason, r.ToolCalls)
		}
		for _, c := range r.ToolCalls {
			if c.ID == "" || c.Function.Name == "" || c.Type != "function" {
				t.Errorf("call not normalised: %+v", c)
			}
		}
		if _, err := session.NewChunk(session.KindAssistant, r.Chunk().Payload()); err != nil {
			t.Errorf("chunk invalid: %v", err)
		}
	}
	// Streams with calls that carry no id get one too.
	srv.Enqueue(llmtest.Reply{ToolCalls: calls})
	r, err := p.ChatStream(t.Context(), userReq("hi"), nil)
	if err != nil || len(r.ToolCalls) != 2 || r.ToolCalls[0].ID == "" || r.ToolCalls[0].ID == r.ToolCalls[1].ID {
		t.Errorf("stream ids: %+v %v", r.ToolCalls, err)
	}
}

func TestOpenAIRefusalAndContentFilter(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	p := newProvider(t, srv, nil)
	for _, stream := range []bool{false, true} {
		srv.Enqueue(llmtest.Reply{Refusal: "I can't help with that.", FinishReason: "content_filter"})
		r, _, err := call(t.Context(), p, stream, userReq("bad"))
		if err != nil {
			t.Fatal(err)
		}
		if r.FinishReason != llm.FinishContentFilter || r.Refusal != "I can't help with that." {
			t.Errorf("stream=%v: finish %q refusal %q", stream, r.FinishReason, r.Refusal)
		}
		if got := r.Chunk().Text(); got != "I can't help with that." {
			t.Errorf("chunk text = %q, want the refusal", got)
		}
	}
}

func TestOpenAIInvalidRequests(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	p := newProvider(t, srv, nil)
	cases := map[string]func(*llm.Request){
		"tool params not object": func(r *llm.Request) { r.Tools = []llm.Tool{{Name: "x", Parameters: json.RawMessage(`[1]`)}} },
		"tool without name":      func(r *llm.Request) { r.Tools = []llm.Tool{{Description: "d"}} },
		"response format":        func(r *llm.Request) { r.ResponseFormat = json.RawMessage(`"json"`) },
		"extra stream":           func(r *llm.Request) { r.Extra = map[string]any{"stream": true} },
		"extra unencodable":      func(r *llm.Request) { r.Extra = map[string]any{"f": func() {}} },
		"negative max tokens":    func(r *llm.Request) { r.MaxTokens = -1 },
		"message without role":   func(r *llm.Request) { r.Messages = append(r.Messages, llm.Message{Content: "x"}) },
	}
	for name, mod := range cases {
		req := userReq("hi")
		mod(&req)
		_, err := p.Chat(t.Context(), req)
		if !errors.Is(err, llm.ErrPermanent) {
			t.Errorf("%s: err = %v, want permanent", name, err)
		}
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("invalid requests reached the server %d times", n)
	}
	p2, err := llm.NewOpenAI(llm.OpenAIConfig{BaseURL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p2.Chat(t.Context(), userReq("hi")); !errors.Is(err, llm.ErrPermanent) || !strings.Contains(err.Error(), "no model") {
		t.Errorf("no model: %v", err)
	}
}

func TestNewOpenAIValidation(t *testing.T) {
	t.Parallel()
	cases := map[string]llm.OpenAIConfig{
		"scheme":        {BaseURL: "ftp://example.com/v1"},
		"no host":       {BaseURL: "http:///v1"},
		"unparseable":   {BaseURL: "http://[::1"},
		"azure no url":  {Azure: true},
		"key newline":   {APIKey: testKey + "\n"},
		"neg timeout":   {Timeout: -time.Second},
		"neg attempts":  {MaxAttempts: -1},
		"neg delay":     {BaseDelay: -1},
		"neg max delay": {MaxDelay: -1},
	}
	for name, cfg := range cases {
		_, err := llm.NewOpenAI(cfg)
		if !errors.Is(err, llm.ErrPermanent) {
			t.Errorf("%s: err = %v, want permanent", name, err)
			continue
		}
		if strings.Contains(err.Error(), testKey) {
			t.Errorf("%s: key in error %q", name, err)
		}
	}
	_, err := llm.NewOpenAI(llm.OpenAIConfig{BaseURL: "https://user:" + testKey + "@example.com:bad/v1"})
	if err == nil || strings.Contains(err.Error(), testKey) {
		t.Errorf("URL credentials: %v", err)
	}
	p, err := llm.NewOpenAI(llm.OpenAIConfig{Model: "m"})
	if err != nil || p.Model() != "m" {
		t.Errorf("defaults: %v", err)
	}
}

func TestOpenAIConcurrentUse(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	srv.Handle(func(r llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Content: "echo " + *r.Messages[len(r.Messages)-1].Content}
	})
	p := newProvider(t, srv, nil)
	const n = 16
	errc := make(chan error, n)
	for i := range n {
		go func() {
			msg := fmt.Sprintf("m%d", i)
			r, _, err := call(t.Context(), p, i%2 == 0, userReq(msg))
			if err == nil && r.Content != "echo "+msg {
				err = fmt.Errorf("got %q for %q", r.Content, msg)
			}
			errc <- err
		}()
	}
	for range n {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
}
