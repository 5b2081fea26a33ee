package flowfile_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/flowfile"
	"github.com/rath-run/rath/pkg/sandbox/policy"
)

const sandboxed = `agents:
  builder:
    model: scripted
    tools: [builtin]
    script: [x]
    sandbox:
      backend: docker
      image: rath-sandbox:busybox
      network: none
      timeout_seconds: 30
  helper:
    model: scripted
    script: [y]
    sandbox: {backend: local}
  plain:
    model: scripted
    script: [z]
steps:
  - agent: plain
  - agent: builder
  - agent: helper
`

// TestSandboxBlocks: an agent's sandbox block parses into its spec (block
// and flow style), survives Encode, and an agent without one has none.
func TestSandboxBlocks(t *testing.T) {
	t.Parallel()
	f, err := flowfile.Parse("wf.yaml", []byte(sandboxed), nil)
	if err != nil {
		t.Fatal(err)
	}
	check := func(f *flowfile.File) {
		t.Helper()
		want := map[string]*agent.Sandbox{
			"builder": {Backend: "docker", Image: "rath-sandbox:busybox", Network: "none", TimeoutSeconds: 30},
			"helper":  {Backend: "local"},
			"plain":   nil,
		}
		for name, sb := range want {
			got := f.Agents[name].Spec.Sandbox
			if fmt.Sprint(got) != fmt.Sprint(sb) {
				t.Errorf("agents.%s.sandbox = %+v, want %+v", name, got, sb)
			}
		}
	}
	check(f)
	if _, err := f.Build(); err != nil {
		t.Fatal(err)
	}
	enc, err := f.Encode()
	if err != nil {
		t.Fatal(err)
	}
	again, err := flowfile.Parse("encoded", enc, nil)
	if err != nil {
		t.Fatalf("encoded file does not parse: %v\n%s", err, enc)
	}
	check(again)
}

// TestCheckSandboxes: the operator's policy refuses a block at submit with
// an *Error naming the block's field and its line: the image, the backend,
// the network, and (for an agent given by file) the agent's own line.
func TestCheckSandboxes(t *testing.T) {
	t.Parallel()
	cluster := policy.Default(false, "rath-sandbox:busybox") // docker only, one image, no network
	dev := policy.Default(true, "rath-sandbox:busybox")      // local and docker, any image
	allowed := func(p *policy.Policy) flowfile.SandboxCheck {
		return func(sb agent.Sandbox) error { _, err := p.Check(sb.Placement()); return err }
	}
	head := "agents:\n  a:\n    model: scripted\n    script: [x]\n"
	steps := "steps:\n  - agent: a\n"
	for _, tc := range []struct {
		name, doc string
		p         *policy.Policy
		line, col int
		want      string
	}{
		{"image outside", head + "    sandbox:\n      backend: docker\n      image: alpine:latest\n" + steps, cluster, 7, 7,
			`agents.a.sandbox.image: "alpine:latest" is not allowed by the operator's sandbox policy`},
		{"backend outside", head + "    sandbox: {backend: local}\n" + steps, cluster, 5, 15,
			`agents.a.sandbox.backend: "local" is not allowed by the operator's sandbox policy`},
		{"network outside", head + "    sandbox:\n      backend: docker\n      network: egress\n" + steps, cluster, 7, 7,
			"agents.a.sandbox.network:"},
		{"timeout outside", head + "    sandbox:\n      backend: docker\n      timeout_seconds: 90000\n" + steps, dev, 7, 7,
			"agents.a.sandbox.timeout_seconds: 90000 is not allowed"},
		{"second agent", sandboxed, cluster, 14, 15, `agents.helper.sandbox.backend: "local" is not allowed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, err := flowfile.Parse("wf.yaml", []byte(tc.doc), nil)
			if err != nil {
				t.Fatal(err)
			}
			err = f.CheckSandboxes("wf.yaml", allowed(tc.p))
			var fe *flowfile.Error
			if !errors.As(err, &fe) || !errors.Is(err, flowfile.ErrInvalid) {
				t.Fatalf("CheckSandboxes = %v (%T), want a *flowfile.Error", err, err)
			}
			if fe.Line != tc.line || fe.Column != tc.col || !strings.Contains(err.Error(), tc.want) ||
				!strings.HasPrefix(err.Error(), fmt.Sprintf("wf.yaml:%d:%d: ", tc.line, tc.col)) {
				t.Errorf("CheckSandboxes = %q, want wf.yaml:%d:%d: … %q", err, tc.line, tc.col, tc.want)
			}
		})
	}
	f, err := flowfile.Parse("wf.yaml", []byte(sandboxed), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.CheckSandboxes("wf.yaml", allowed(dev)); err != nil {
		t.Errorf("the dev policy refuses %v", err)
	}

	// An agent given by file: its block is in that file, so the refusal
	// names the agent's line in the workflow file.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("model: scripted\nscript: [x]\nsandbox: {backend: local}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte("agents:\n  a: a.yaml\n"+steps), 0o600); err != nil {
		t.Fatal(err)
	}
	if f, err = flowfile.Load(filepath.Join(dir, "wf.yaml")); err != nil {
		t.Fatal(err)
	}
	err = f.CheckSandboxes("wf.yaml", allowed(cluster))
	var fe *flowfile.Error
	if !errors.As(err, &fe) || fe.Line != 2 || fe.Field != "agents.a.sandbox.backend" {
		t.Errorf("CheckSandboxes of a file agent = %v, want line 2 naming agents.a.sandbox.backend", err)
	}
}
