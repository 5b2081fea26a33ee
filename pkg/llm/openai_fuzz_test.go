package llm_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/pkg/llm"
)

// replyWith answers every call with one status and body.
type replyWith struct {
	status int
	body   []byte
	stream bool
}

func (c replyWith) RoundTrip(r *http.Request) (*http.Response, error) {
	ct := "application/json"
	if c.stream {
		ct = "text/event-stream"
	}
	return &http.Response{
		StatusCode: c.status,
		Header:     http.Header{"Content-Type": {ct}},
		Body:       io.NopCloser(bytes.NewReader(c.body)),
		Request:    r,
	}, nil
}

// FuzzOpenAIReply feeds arbitrary replies of an OpenAI-compatible endpoint
// (status, body; whole or streamed) to Chat and ChatStream. Whatever the
// endpoint sends: no panic; an error is an *llm.Error, exactly one of
// transient or permanent, naming the operation and never holding the API
// key (even when the endpoint echoes it); a reply without error has a
// finish reason and tool calls that each carry an id and a function name,
// so its transcript chunk is valid.
func FuzzOpenAIReply(f *testing.F) {
	ok := `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
	for _, s := range []struct {
		status int
		body   string
		stream bool
	}{
		{200, ok, false},
		{200, `{"id":"x","choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"echo","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`, false},
		{200, `{"id":"x","choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"type":"function","function":{"arguments":"{"}}]}}]}`, false},
		{200, `{"id": "x", "choices": [`, false},
		{200, `{"id":"x","choices":[]}`, false},
		{200, `{"id":"x","choices":"many"}`, false},
		{200, `null`, false},
		{200, ``, false},
		{400, `{"error":{"message":"bad key ` + testKey + `","type":"invalid_request_error","code":"x"}}`, false},
		{429, `{"error":{"message":"slow down"}}`, false},
		{500, `<html>oops</html>`, false},
		{200, "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hal\"}}]}\n\ndata: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", true},
		{200, "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hal\"}}]}\n\ndata: [DONE]\n\n", true},
		{200, "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":3,\"function\":{\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n", true},
		{200, "data: {not json\n\n", true},
		{200, "data: {\"error\":{\"message\":\"" + testKey + "\"}}\n\n", true},
	} {
		f.Add(s.status, []byte(s.body), s.stream)
	}
	f.Fuzz(func(t *testing.T, status int, body []byte, stream bool) {
		if status < 100 || status > 599 {
			status = 200
		}
		p, err := llm.NewOpenAI(llm.OpenAIConfig{
			BaseURL:     "http://model.invalid/v1",
			APIKey:      testKey,
			Model:       "gpt-test",
			MaxAttempts: 1,
			Timeout:     10 * time.Second,
			HTTPClient:  &http.Client{Transport: replyWith{status, body, stream}},
		})
		if err != nil {
			t.Fatal(err)
		}
		op := "chat"
		if stream {
			op = "chat stream"
		}
		resp, _, err := call(t.Context(), p, stream, userReq("hi"))
		if err != nil {
			var le *llm.Error
			if !errors.As(err, &le) {
				t.Fatalf("error %v (%T) is not an *llm.Error", err, err)
			}
			if errors.Is(err, llm.ErrTransient) == errors.Is(err, llm.ErrPermanent) {
				t.Fatalf("error %v is not exactly one of transient or permanent", err)
			}
			if le.Op != op {
				t.Fatalf("error %v: op %q, want %q", err, le.Op, op)
			}
			if strings.Contains(err.Error(), testKey) || strings.Contains(err.Error(), testKey[3:]) {
				t.Fatalf("error leaks the API key: %v", err)
			}
			return
		}
		if resp.FinishReason == "" {
			t.Fatalf("reply %+v has no finish reason", resp)
		}
		for i, c := range resp.ToolCalls {
			if c.ID == "" || c.Function.Name == "" {
				t.Fatalf("tool call %d %+v lacks an id or a name", i, c)
			}
		}
	})
}
