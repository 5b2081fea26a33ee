package app_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/coordinator"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/session"
)

// TestDevRunWithMCPTools runs two scripted agents whose spec names the test
// MCP server (pkg/tool/mcp/testdata/mcpserver) through the dev stack: the
// worker discovers its tools, calls them, records isError and a crash as
// error bodies, restarts the crashed server, and keeps it for the next run.
func TestDevRunWithMCPTools(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "mcpserver")
	if out, err := exec.Command("go", "build", "-o", bin, "../../pkg/tool/mcp/testdata/mcpserver").CombinedOutput(); err != nil {
		t.Fatalf("build the test MCP server: %v\n%s", err, out)
	}
	spec := func(script string) string {
		return `{"name": "mcp-user", "model": "scripted",
		  "mcp": [{"name": "srv", "command": ` + jsonString(t, bin) + `, "tools": ["echo", "fail", "crash", "pid"]}],
		  "script": ` + script + `}`
	}
	s := startDev(t, "", app.DevConfig{Workers: 1})
	first := runBodies(t, s, spec(`[
	  {"tool_calls": [
	    {"function": {"name": "srv__echo", "arguments": {"text": "hi"}}},
	    {"function": {"name": "srv__fail", "arguments": {}}}
	  ]},
	  {"tool_calls": [{"function": {"name": "srv__crash", "arguments": {}}}]},
	  {"tool_calls": [{"function": {"name": "srv__pid", "arguments": {}}}]},
	  {"content": "done"}
	]`))
	if len(first) != 4 {
		t.Fatalf("tool results %v, want 4", first)
	}
	if first[0] != `{"text":"hi"}` {
		t.Errorf("echo = %s", first[0])
	}
	for i, want := range [][]string{
		1: {`"ok":false`, `"error_kind":"tool_execution_exception"`, `"message":"disk on fire"`},
		2: {`"ok":false`, `"error_kind":"tool_execution_exception"`, "exit status 3", "crashing as asked"},
	} {
		for _, w := range want {
			if !strings.Contains(first[i], w) {
				t.Errorf("result %d = %s, want it to contain %s", i, first[i], w)
			}
		}
	}
	pid := regexp.MustCompile(`^\{"text":"[0-9]+"\}$`)
	if !pid.MatchString(first[3]) {
		t.Fatalf("pid after the crash = %s", first[3])
	}
	// The next run finds the restarted server still running: same process.
	second := runBodies(t, s, spec(`[
	  {"tool_calls": [{"function": {"name": "srv__pid", "arguments": {}}}]},
	  {"content": "done"}
	]`))
	if !slices.Equal(second, first[3:]) {
		t.Fatalf("second run's pid %v, want the first run's %s", second, first[3])
	}
}

// TestDevRunMCPNotAllowed: a command RATH_MCP_ALLOW does not list is
// refused at submit by the dev coordinator, which reads the workers'
// policy, naming agent.mcp[0].command; through a coordinator that does not
// know the policy, the worker fails the step at once, with the reason, and
// starts nothing.
func TestDevRunMCPNotAllowed(t *testing.T) {
	t.Parallel()
	s := startDev(t, "", app.DevConfig{Workers: 1, Getenv: func(k string) string {
		if k == "RATH_MCP_ALLOW" {
			return "/usr/local/bin/mcp-files, /usr/local/bin/mcp-web"
		}
		return ""
	}})
	spec := `{"name": "mcp-user", "model": "scripted", "script": ["unused"],
	  "mcp": [{"name": "shell", "command": "/bin/sh", "args": ["-c", "echo pwned"]}]}`
	// The dev coordinator knows its workers' policy: refused at submit.
	ctx := context.Background()
	err := s.cl.Do(ctx, "POST", "/v1/runs", map[string]any{"agent": json.RawMessage(spec), "message": "hi"}, nil)
	if err == nil || !strings.Contains(err.Error(), "400") ||
		!strings.Contains(err.Error(), `agent.mcp[0].command: "/bin/sh" is not allowed by the operator's MCP policy`) {
		t.Fatalf("submit on the dev stack: %v, want a 400 naming agent.mcp[0].command", err)
	}
	// A coordinator that does not know it records the run; the worker
	// refuses the command for good.
	blind, err := coordinator.New(s.dev.Backend.Store, s.dev.Backend.Runs, s.dev.Backend.Bus, coordinator.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := blind.Submit(ctx, api.SubmitRequest{Agent: json.RawMessage(spec), Message: "hi"})
	if err != nil {
		t.Fatalf("submit through a coordinator that does not know the policy: %v", err)
	}
	r := s.waitRun(t, sub.ID)
	if r.Status != runs.RunFailed || !strings.Contains(r.Error, `command "/bin/sh"`) ||
		!strings.Contains(r.Error, "not allowed on this worker") {
		t.Fatalf("run ended %s: %q", r.Status, r.Error)
	}
	if len(r.Steps) != 1 || r.Steps[0].Attempts != 1 {
		t.Fatalf("steps = %+v, want one attempt (a permanent failure)", r.Steps)
	}
}

// runBodies submits spec, waits for success and returns the tool_result
// bodies of the output version.
func runBodies(t *testing.T, s *stack, spec string) []string {
	t.Helper()
	ctx := context.Background()
	r := s.waitRun(t, s.submit(t, spec, "use the server").ID)
	if r.Status != runs.RunSucceeded || r.Output == nil {
		t.Fatalf("run ended %s (%s)", r.Status, r.Error)
	}
	out, err := session.Open(ctx, s.dev.Backend.Store, *r.Output)
	if err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for _, c := range out.Version().Chunks {
		if tr, ok := c.ToolResult(); ok {
			bodies = append(bodies, tr.Content)
		}
	}
	return bodies
}

func jsonString(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
