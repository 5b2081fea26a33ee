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

// FuzzParse: any input gives a file or an *Error, never a panic; a file
// that parses encodes to one that parses again and builds.
func FuzzParse(f *testing.F) {
	triage, err := os.ReadFile(filepath.Join("..", "..", "examples", "workflows", "triage.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(triage)
	for _, s := range []string{
		agents + "steps:\n  - agent: a\n",
		agents + "steps:\n  - fork: {n: 3, agent: a}\n  - compress: b\n",
		agents + "workflows:\n  w:\n    steps: [{agent: a}]\nsteps:\n  - select: {selector: a, candidates: [b, w], max_rounds: 2}\n  - sequence: [{run: w}]\n",
		agents + "workflows:\n  w:\n    steps: [{run: w}]\nsteps:\n  - run: w\n",
		"agents:\n  a:\n    model: scripted\n    script: [x]\n    sandbox: {backend: docker, image: rath-sandbox:busybox, network: none, timeout_seconds: 5}\nsteps:\n  - agent: a\n",
		"agents:\n  a:\n    model: scripted\n    script: [x]\n    sandbox:\n      backend: local\n      limits: {x: 1}\nsteps:\n  - agent: a\n",
		"agents:\n  a:\n    model: scripted\n    script: [x]\n    tools: [builtin, x]\n    mcp:\n      - {name: m, command: /bin/sh}\nsteps:\n  - agent: a\n",
		agents + "steps:\n  - rollout: {n: 2, agent: a, limit: 1, verifier: {command: 'test -f x', timeout_seconds: 2.5}}\n  - rollout: {branches: [a, b], verifier: make}\n",
		"steps: []", "", "- 1", "a: &x [*x]", "steps:\n  - agent: a\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := flowfile.Parse("fuzz.yaml", data, nil)
		if err != nil {
			var fe *flowfile.Error
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *flowfile.Error", err)
			}
			return
		}
		if _, err := file.Build(); err != nil {
			t.Fatalf("a parsed file does not build: %v", err)
		}
		// Refusing every tool and MCP server locates the refusal (any
		// position, never a panic) as an *Error.
		refuseAll := func(s agent.Spec) error {
			switch {
			case len(s.Tools) > 0:
				return fmt.Errorf("tools[%d]: no", len(s.Tools)-1)
			case len(s.MCP) > 0:
				return fmt.Errorf("mcp[%d].command: no", len(s.MCP)-1)
			}
			return nil
		}
		if err := file.CheckAgents("fuzz.yaml", refuseAll); err != nil {
			var fe *flowfile.Error
			if !errors.As(err, &fe) || fe.Line < 0 || fe.Column < 0 {
				t.Fatalf("CheckAgents: %v, want an *Error", err)
			}
		}
		enc, err := file.Encode()
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		again, err := flowfile.Parse("encoded.yaml", enc, nil)
		if err != nil {
			t.Fatalf("encoded file does not parse: %v\n%s", err, enc)
		}
		if len(again.Steps) != len(file.Steps) || len(again.Agents) != len(file.Agents) {
			t.Fatalf("encoding changed the file")
		}
	})
}
