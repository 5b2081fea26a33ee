package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/tool/builtin"
)

// TestExampleAgents: every example agent and the demo's agent parse, and
// their tools exist in a default worker.
func TestExampleAgents(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../examples/agents/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("examples: %v %v", files, err)
	}
	specs := map[string]agent.Spec{}
	for _, f := range files {
		s, err := LoadAgentSpec(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		specs[f] = s
	}
	demo, err := agent.ParseSpec([]byte(demoAgent))
	if err != nil {
		t.Fatalf("demo agent: %v", err)
	}
	specs["demo"] = demo
	for name, s := range specs {
		if _, err := builtin.NewRegistry().Select(s.Tools); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestDemoRunsTools runs `rathctl demo` end to end: the scripted agent
// writes and reads a workspace file through the built-in tools.
func TestDemoRunsTools(t *testing.T) {
	t.Parallel()
	code, out, errOut := rathctl(t, "", "demo")
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	for _, want := range []string{
		"step.tool_call  write_workspace_file",
		`tool_result write_workspace_file → {"bytes_written":122}`,
		`tool_result read_workspace_file → {"data":"Day 1: Fushimi Inari`,
		`tool_result run_shell_command → {"exit_code":0,"stdout":"3\n"`,
		"session graph:",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}
