package app_test

import (
	"context"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/llm/llmtest"
	"github.com/rath-run/rath/pkg/session"
)

// TestBadInputCatalogModel runs agents of a dev stack against a fake
// OpenAI-compatible endpoint (pkg/llm/llmtest, over HTTP) that answers
// badly: a body that is not JSON, one of the wrong shape, one without
// choices, a stream cut before its finish, a 4xx error. Each run fails
// with a reason naming the model call and what was wrong, and commits no
// output version. A tool call whose arguments violate the tool's schema is
// not a failure: the model gets an invalid_tool_arguments result naming
// the field and another turn, and the run succeeds. MaxDeliver is 1 so a
// transient failure is final at once. docs/RELIABILITY.md ("Bad input")
// lists the catalog.
func TestBadInputCatalogModel(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	cases := []struct {
		name  string
		reply llmtest.Reply
		want  []string // in the run's error; none: the run succeeds
	}{
		{"not-json", llmtest.Reply{Body: `{"id": "x", "choices": [`}, []string{"model gpt-test", "llm chat stream", "stream ended before a finish reason"}},
		{"wrong-shape", llmtest.Reply{Body: "data: {\"id\":\"x\",\"choices\":\"many\"}\n\n"}, []string{"model gpt-test", "llm chat stream", "malformed reply", "choices"}},
		{"no-choices", llmtest.Reply{Body: "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"choices\":[]}\n\ndata: [DONE]\n\n"}, []string{"llm chat stream", "finish reason"}},
		{"cut-stream", llmtest.Reply{Body: "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hal\"}}]}\n\ndata: [DONE]\n\n"}, []string{"llm chat stream", "finish reason"}},
		{"status-400", llmtest.Reply{Status: 400, ErrorMessage: "model gpt-test does not exist", ErrorType: "invalid_request_error"}, []string{"status 400", "model gpt-test does not exist"}},
		{"schema-violation", llmtest.Reply{ToolCalls: []session.ToolCall{{ID: "call_1", Type: "function",
			Function: session.FunctionCall{Name: "write_workspace_file", Arguments: `{"path":5,"content":"x"}`}}}}, nil},
	}
	byName := map[string]llmtest.Reply{}
	for _, c := range cases {
		byName[c.name] = c.reply
	}
	srv.Handle(func(r llmtest.Request) llmtest.Reply {
		var first string
		for _, m := range r.Messages {
			if m.Role == "user" && m.Content != nil {
				first = *m.Content
				break
			}
		}
		if last := r.Messages[len(r.Messages)-1]; last.Role == "tool" {
			return llmtest.Reply{Content: "noted: " + *last.Content}
		}
		if rep, ok := byName[first]; ok {
			return rep
		}
		return llmtest.Reply{Status: 400, ErrorMessage: "unexpected request " + first}
	})
	env := map[string]string{"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": srv.URL()}
	s := startDev(t, "", app.DevConfig{Workers: 1, Bus: bus.Config{MaxDeliver: 1}, Getenv: func(k string) string { return env[k] }})
	ctx := context.Background()
	for _, c := range cases {
		r := s.submit(t, `{"name":"a","model":"gpt-test","tools":["builtin"]}`, c.name)
		r = s.waitRun(t, r.ID)
		t.Logf("%s: %s %q", c.name, r.Status, r.Error)
		if c.want == nil {
			if r.Status != runs.RunSucceeded || r.Output == nil {
				t.Errorf("%s: run %s (%s), want succeeded", c.name, r.Status, r.Error)
				continue
			}
			out, err := session.Open(ctx, s.dev.Backend.Store, *r.Output)
			if err != nil {
				t.Fatal(err)
			}
			chunks, err := out.Chunks(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var result string
			for _, ch := range chunks {
				if ch.Kind() == session.KindToolResult {
					result = string(ch.Payload())
				}
			}
			if !strings.Contains(result, "invalid_tool_arguments") || !strings.Contains(result, "path") {
				t.Errorf("%s: tool result %s; want invalid_tool_arguments naming path", c.name, result)
			}
			continue
		}
		if r.Status != runs.RunFailed {
			t.Errorf("%s: run %s, want failed", c.name, r.Status)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(r.Error, w) {
				t.Errorf("%s: run error %q does not mention %q", c.name, r.Error, w)
			}
		}
		if r.Output != nil {
			t.Errorf("%s: a failed run committed output %s", c.name, r.Output)
		}
	}
}
