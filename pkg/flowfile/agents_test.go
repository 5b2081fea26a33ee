package flowfile_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/flowfile"
)

// offerCheck refuses the tool teleport and the MCP command /bin/sh, naming
// the spec's field as the coordinator does.
func offerCheck(s agent.Spec) error {
	for i, n := range s.Tools {
		if n == "teleport" {
			return fmt.Errorf("tools[%d]: unknown tool %q", i, n)
		}
	}
	for i, m := range s.MCP {
		if m.Command == "/bin/sh" {
			return fmt.Errorf("mcp[%d].command: %q is not allowed", i, m.Command)
		}
	}
	return nil
}

// TestCheckAgents: a refusal is an *Error at the field it names, in flow
// and block style, prefixed with the agent; an agent from a file is named
// at its entry; agents that pass give nil.
func TestCheckAgents(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "far.yaml"), []byte("model: scripted\nscript: [x]\ntools: [teleport]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, doc, want string }{
		{"flow list", "agents:\n  ok:\n    model: scripted\n    script: [x]\n  coder:\n    model: scripted\n    tools: [builtin, teleport]\n    script: [x]\nsteps:\n  - agent: coder\n",
			`f.yaml:7:22: agents.coder.tools[1]: unknown tool "teleport"`},
		{"block mcp", "agents:\n  coder:\n    model: scripted\n    script: [x]\n    mcp:\n      - name: ok\n        command: /usr/bin/ok\n      - name: sh\n        command: /bin/sh\nsteps:\n  - agent: coder\n",
			`f.yaml:9:9: agents.coder.mcp[1].command: "/bin/sh" is not allowed`},
		{"from a file", "agents:\n  far: far.yaml\nsteps:\n  - agent: far\n",
			`f.yaml:2:3: agents.far.tools[0]: unknown tool "teleport"`},
		{"all offered", "agents:\n  coder:\n    model: scripted\n    script: [x]\n    tools: [builtin]\nsteps:\n  - agent: coder\n", ""},
	} {
		p := filepath.Join(dir, "f.yaml")
		if err := os.WriteFile(p, []byte(tc.doc), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := flowfile.Load(p)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		err = f.CheckAgents("f.yaml", offerCheck)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v, want nil", tc.name, err)
			}
			continue
		}
		var fe *flowfile.Error
		if !errors.As(err, &fe) || err.Error() != tc.want {
			t.Errorf("%s: %v, want *Error %q", tc.name, err, tc.want)
		}
	}
}
