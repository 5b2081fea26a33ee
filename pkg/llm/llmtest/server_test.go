package llmtest_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/rath-run/rath/pkg/llm/llmtest"
	"github.com/rath-run/rath/pkg/session"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// post sends body and returns the status, headers and whole response body.
func post(t *testing.T, url, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func TestStreamWireFormat(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	srv.Enqueue(llmtest.Reply{
		Content:   "two words",
		ToolCalls: []session.ToolCall{{ID: "c1", Function: session.FunctionCall{Name: "f", Arguments: `{"path":"a.txt"}`}}},
		Usage:     session.Usage{PromptTokens: 3, CompletionTokens: 4},
	})
	_, h, body := post(t, srv.URL(), `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	if ct := h.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var events []map[string]any
	done := false
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("line without data prefix: %q", line)
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		if done {
			t.Fatalf("event after [DONE]: %s", data)
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("bad event %q: %v", data, err)
		}
		events = append(events, ev)
	}
	if !done {
		t.Fatal("no [DONE]")
	}
	var text, args strings.Builder
	argFragments, finishes := 0, 0
	for _, ev := range events[:len(events)-1] {
		ch := ev["choices"].([]any)[0].(map[string]any)
		d := ch["delta"].(map[string]any)
		if c, ok := d["content"].(string); ok {
			text.WriteString(c)
		}
		if tcs, ok := d["tool_calls"].([]any); ok {
			fn := tcs[0].(map[string]any)["function"].(map[string]any)
			if a := fn["arguments"].(string); a != "" {
				args.WriteString(a)
				argFragments++
			}
		}
		if ch["finish_reason"] != nil {
			finishes++
			if ch["finish_reason"] != "tool_calls" {
				t.Errorf("finish = %v", ch["finish_reason"])
			}
		}
	}
	if text.String() != "two words" || args.String() != `{"path":"a.txt"}` || argFragments < 2 || finishes != 1 {
		t.Errorf("text %q args %q fragments %d finishes %d", text.String(), args.String(), argFragments, finishes)
	}
	last := events[len(events)-1]
	if len(last["choices"].([]any)) != 0 || last["usage"].(map[string]any)["total_tokens"] != float64(7) {
		t.Errorf("usage chunk = %v", last)
	}
	r := srv.Requests()[0]
	if !r.Stream || r.Header.Get("Authorization") != "Bearer k" || *r.Messages[0].Content != "hi" {
		t.Errorf("recorded = %+v", r)
	}
}

func TestJSONAndErrors(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	if status, _, _ := post(t, srv.URL(), `{"model":"m"}`); status != http.StatusBadRequest {
		t.Errorf("no reply queued: status %d", status)
	}
	srv.Enqueue(llmtest.Reply{Status: 429, Header: http.Header{"Retry-After": {"2"}}}, llmtest.Reply{Content: "x"})
	status, h, body := post(t, srv.URL(), `{"model":"m"}`)
	if status != http.StatusTooManyRequests || h.Get("Retry-After") != "2" || !strings.Contains(string(body), `"type":"rate_limit_error"`) {
		t.Errorf("429: %d %q %s", status, h.Get("Retry-After"), body)
	}
	_, _, body = post(t, srv.URL(), `{"model":"m"}`)
	var c struct {
		Object  string
		Model   string
		Choices []struct {
			Message      struct{ Content string }
			FinishReason string `json:"finish_reason"`
		}
	}
	if err := json.Unmarshal(body, &c); err != nil || c.Object != "chat.completion" || c.Model != "m" ||
		c.Choices[0].Message.Content != "x" || c.Choices[0].FinishReason != "stop" {
		t.Errorf("completion = %+v %v", c, err)
	}
}
