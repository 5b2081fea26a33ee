package app_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/coordinator"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/llm/llmtest"
	"github.com/rath-run/rath/pkg/session"
)

// toolSpec is a scripted agent that writes a file, then reads it back, lists
// the directory and runs a command on it, all through the worker's local
// sandbox.
const toolSpec = `{
  "name": "scribe", "model": "scripted", "tools": ["builtin"],
  "script": [
    {"content": "Writing.", "tool_calls": [{"function": {"name": "write_workspace_file", "arguments": {"path": "notes/plan.md", "content": "Day 1: Fushimi Inari"}}}]},
    {"tool_calls": [
      {"function": {"name": "read_workspace_file", "arguments": {"path": "notes/plan.md"}}},
      {"function": {"name": "list_workspace_files", "arguments": {"path": "notes"}}},
      {"function": {"name": "run_shell_command", "arguments": {"cmd": "wc -c < notes/plan.md"}}},
      {"function": {"name": "read_workspace_file", "arguments": {"path": "../../etc/passwd"}}}
    ]},
    {"content": "Saved and checked."}
  ]
}`

func TestDevRunWithBuiltinTools(t *testing.T) {
	t.Parallel()
	s := startDev(t, "", app.DevConfig{Workers: 1})
	ctx := context.Background()
	r := s.submit(t, toolSpec, "Keep my plan.")
	var mu sync.Mutex
	var events []api.Event
	if err := s.cl.Watch(ctx, r.ID, func(e api.Event) error {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
		return nil
	}); err != nil {
		t.Fatalf("watch: %v", err)
	}
	r = s.waitRun(t, r.ID)
	if r.Status != runs.RunSucceeded || r.Output == nil {
		t.Fatalf("run ended %s (%s)", r.Status, r.Error)
	}
	out, err := session.Open(ctx, s.dev.Backend.Store, *r.Output)
	if err != nil {
		t.Fatal(err)
	}
	v := out.Version()
	var kinds []string
	var bodies []string
	for _, c := range v.Chunks {
		kinds = append(kinds, string(c.Kind()))
		if tr, ok := c.ToolResult(); ok {
			bodies = append(bodies, tr.Content)
		}
	}
	want := []string{"assistant", "tool_result", "assistant", "tool_result", "tool_result", "tool_result", "tool_result", "assistant"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("chunks %v, want %v", kinds, want)
	}
	for i, want := range []string{
		`{"bytes_written":20}`,
		`{"data":"Day 1: Fushimi Inari"}`,
		`{"entries":[{"name":"plan.md","path":"notes/plan.md","is_dir":false}]}`,
		`"stdout":"20\n"`,
		`"error_kind":"path_outside_workspace"`,
	} {
		if !strings.Contains(bodies[i], want) {
			t.Errorf("result %d = %s, want it to contain %s", i, bodies[i], want)
		}
	}
	if v.Placement.Backend != "" {
		t.Errorf("placement changed: %+v", v.Placement)
	}
	mu.Lock()
	defer mu.Unlock()
	var calls, results int
	for _, e := range events {
		switch e.Type {
		case "step.tool_call":
			calls++
		case "step.tool_result":
			results++
		case "step.committed":
			if !strings.Contains(string(e.Data), `"stop":"model"`) {
				t.Errorf("step.committed %s lacks the stop reason", e.Data)
			}
		}
	}
	if calls != 5 || results != 5 {
		t.Fatalf("%d tool_call and %d tool_result events, want 5 each", calls, results)
	}
}

// TestDevRunUnknownToolFails: the dev coordinator knows its workers' tools
// and refuses a spec naming another at submit, naming the field; a
// coordinator that does not know them (a cluster's, whose workers may have
// tools of their own) records the run, and the worker fails it for good,
// once, naming the field too.
func TestDevRunUnknownToolFails(t *testing.T) {
	t.Parallel()
	s := startDev(t, "", app.DevConfig{Workers: 1})
	ctx := context.Background()
	spec := `{"name":"a","model":"scripted","tools":["builtin","teleport"],"script":["x"]}`
	var refused runs.Run
	err := s.cl.Do(ctx, "POST", "/v1/runs", map[string]any{"agent": json.RawMessage(spec), "message": "go"}, &refused)
	if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "agent.tools[1]") || !strings.Contains(err.Error(), "teleport") {
		t.Fatalf("submit of an unknown tool on the dev stack: %v (run %+v), want a 400 naming agent.tools[1]", err, refused)
	}

	blind, err := coordinator.New(s.dev.Backend.Store, s.dev.Backend.Runs, s.dev.Backend.Bus, coordinator.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := blind.Submit(ctx, api.SubmitRequest{Agent: json.RawMessage(spec), Message: "go"})
	if err != nil {
		t.Fatalf("submit through a coordinator that does not know the tools: %v", err)
	}
	r = s.waitRun(t, r.ID)
	if r.Status != runs.RunFailed || !strings.Contains(r.Error, "tools[1]") || !strings.Contains(r.Error, "teleport") {
		t.Fatalf("run %s: %q", r.Status, r.Error)
	}
	if r.Steps[0].Attempts != 1 {
		t.Fatalf("a permanent error was retried: %d attempts", r.Steps[0].Attempts)
	}
}

func TestDevRunBudgetStops(t *testing.T) {
	t.Parallel()
	s := startDev(t, "", app.DevConfig{Workers: 1})
	ctx := context.Background()
	var r runs.Run
	if err := s.cl.Do(ctx, "POST", "/v1/runs", map[string]any{
		"agent": json.RawMessage(toolSpec), "message": "Keep my plan.", "budget": map[string]any{"max_tokens": 5},
	}, &r); err != nil {
		t.Fatal(err)
	}
	if r.Budget.MaxTokens != 5 {
		t.Fatalf("budget not recorded: %+v", r.Budget)
	}
	r = s.waitRun(t, r.ID)
	if r.Status != runs.RunSucceeded {
		t.Fatalf("run %s: %s", r.Status, r.Error)
	}
	out, err := session.Open(ctx, s.dev.Backend.Store, *r.Output)
	if err != nil {
		t.Fatal(err)
	}
	v := out.Version()
	last := v.Chunks[len(v.Chunks)-1]
	if last.Kind() != session.KindNote || !strings.Contains(last.Text(), "run_tokens") {
		t.Fatalf("last chunk %s", last)
	}
	found := false
	for _, e := range v.Extras {
		found = found || (e.Key == "budget.exceeded" && string(e.Value) == `"run_tokens"`)
	}
	if !found {
		t.Fatalf("extras %v", v.Extras)
	}
	if err := s.cl.Do(ctx, "POST", "/v1/runs", map[string]any{
		"agent": json.RawMessage(toolSpec), "message": "x", "budget": map[string]any{"max_tokens": -1},
	}, &r); err == nil || !strings.Contains(err.Error(), "budget.max_tokens") {
		t.Fatalf("negative budget: %v", err)
	}
}

// TestDevRunOpenAICompatible is the README's "real endpoint" run with the
// fake OpenAI server standing in: the worker resolves the model from
// OPENAI_BASE_URL / OPENAI_API_KEY, streams the reply, runs the tool call
// the model asks for and sends its result back.
func TestDevRunOpenAICompatible(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	srv.Enqueue(
		llmtest.Reply{Content: "Saving.", ToolCalls: []session.ToolCall{{ID: "call_1", Type: "function",
			Function: session.FunctionCall{Name: "write_workspace_file", Arguments: `{"path":"fizz.py","content":"print('fizz')"}`}}},
			Usage: session.Usage{PromptTokens: 100, CompletionTokens: 20, TotalTokens: 120}},
		llmtest.Reply{Content: "Done: fizz.py is written.", Usage: session.Usage{PromptTokens: 150, CompletionTokens: 8, TotalTokens: 158}},
	)
	env := map[string]string{"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": srv.URL()}
	s := startDev(t, "", app.DevConfig{Workers: 1, Getenv: func(k string) string { return env[k] }})
	ctx := context.Background()
	r := s.submit(t, `{"name":"assistant","model":"gpt-test","instructions":"Use tools.","tools":["builtin"]}`, "Write fizz.py")
	var mu sync.Mutex
	var text strings.Builder
	if err := s.cl.Watch(ctx, r.ID, func(e api.Event) error {
		if e.Type == "step.token" {
			var d struct{ Text string }
			_ = json.Unmarshal(e.Data, &d)
			mu.Lock()
			text.WriteString(d.Text)
			mu.Unlock()
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r = s.waitRun(t, r.ID)
	if r.Status != runs.RunSucceeded {
		t.Fatalf("run %s: %s", r.Status, r.Error)
	}
	out, err := session.Open(ctx, s.dev.Backend.Store, *r.Output)
	if err != nil {
		t.Fatal(err)
	}
	v := out.Version()
	if v.Usage.TotalTokens != 278 || v.Producer.Model != "gpt-test" || len(v.Chunks) != 3 {
		t.Fatalf("version usage %+v model %q chunks %d", v.Usage, v.Producer.Model, len(v.Chunks))
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || !reqs[0].Stream || reqs[0].Header.Get("Authorization") != "Bearer sk-test" {
		t.Fatalf("%d requests", len(reqs))
	}
	if len(reqs[0].Tools) != 6 {
		t.Fatalf("%d tools sent", len(reqs[0].Tools))
	}
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if last.Role != "tool" || last.ToolCallID != "call_1" || last.Content == nil || *last.Content != `{"bytes_written":13}` {
		t.Fatalf("tool message %+v", last)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := text.String(); got != "Saving.Done: fizz.py is written." {
		t.Fatalf("streamed %q", got)
	}
}
