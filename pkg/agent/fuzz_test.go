package agent_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/tool/builtin"
)

// FuzzToolCall feeds arbitrary tool names and arguments from "the model"
// through the loop with the built-in tools: it never panics, every call is
// answered with a JSON body, and the step commits.
func FuzzToolCall(f *testing.F) {
	for _, s := range [][2]string{
		{"read_workspace_file", `{"path":"a"}`},
		{"read_workspace_file", `{"path":"a","encoding":null}`},
		{"run_shell_command", `{"cmd":"ls\nrm"}`},
		{"run_code", `{"code":"1","timeout":-1}`},
		{"write_workspace_file", `{"path":"x","content":7}`},
		{"nope", `{}`},
		{"list_workspace_files", ``},
		{"workspace_path_exists", `{"path":"\u0000"}`},
		{"run_code", `{"code":"x","language":"COBOL","timeout":1e308}`},
	} {
		f.Add(s[0], s[1])
	}
	set, err := builtin.NewRegistry().Select([]string{builtin.Group})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, name, args string) {
		if name == "" {
			name = "missing_tool_name" // what the providers put there
		}
		a := &agent.Agent{
			Spec:     agent.Spec{Name: "fuzz", Model: "raw"},
			Provider: oneCall{session.ToolCall{ID: "c", Type: "function", Function: session.FunctionCall{Name: name, Arguments: args}}},
			Tools:    set,
		}
		in, err := session.FromUserMessage(context.Background(), session.NewMemoryGraph(), "go")
		if err != nil {
			t.Fatal(err)
		}
		out, err := a.Step(context.Background(), in, agent.Meta{})
		if err != nil {
			t.Fatalf("step failed: %v", err)
		}
		for _, c := range out.Version().Chunks {
			if r, ok := c.ToolResult(); ok && !json.Valid([]byte(r.Content)) {
				t.Fatalf("tool result is not JSON: %q", r.Content)
			}
		}
	})
}

// oneCall answers the first request with its tool call, later ones with text,
// the way a provider passes the wire's calls through.
type oneCall struct{ c session.ToolCall }

func (o oneCall) Chat(_ context.Context, req llm.Request) (llm.Response, error) {
	for _, m := range req.Messages {
		if m.Role == llm.RoleAssistant {
			return llm.Response{Content: "ok", FinishReason: llm.FinishStop}, nil
		}
	}
	return llm.Response{ToolCalls: []session.ToolCall{o.c}, FinishReason: llm.FinishToolCalls}, nil
}
