package flowfile_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/flowfile"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
)

const agents = `agents:
  a:
    model: scripted
    script: [hello]
  b:
    model: scripted
    script: [x, bye]
`

// TestValidationErrors: every error names the line and column of the
// offending node and the field.
func TestValidationErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, doc string
		line, col int
		want      string
	}{
		{"unknown agent", agents + "steps:\n  - agent: c\n", 9, 12, `steps[0].agent: unknown agent "c" (known: a, b)`},
		{"unknown candidate", agents + "steps:\n  - select: {selector: a, candidates: [b, zed], max_rounds: 3}\n", 9, 43, `steps[0].select.candidates[1]: unknown agent or workflow "zed"`},
		{"unbounded loop", agents + "steps:\n  - select: {selector: a, candidates: [b]}\n", 9, 13, "steps[0].select.max_rounds: required: a select loop must be bounded (1..100)"},
		{"loop too long", agents + "steps:\n  - select: {selector: a, candidates: [b], max_rounds: 101}\n", 9, 56, "101 is outside 1..100"},
		{"fork n zero", agents + "steps:\n  - fork: {n: 0, agent: a}\n", 9, 15, "steps[0].fork.n: 0 is outside 1..1000"},
		{"fork n huge", agents + "steps:\n  - fork: {n: 1001, agent: a}\n", 9, 15, "1001 is outside 1..1000"},
		{"fork both", agents + "steps:\n  - fork: {n: 2, agent: a, branches: [a]}\n", 9, 11, "not both"},
		{"unknown key", agents + "steps:\n  - agent: a\n    retry: 3\n", 10, 5, "steps[0].retry: unknown key"},
		{"two kinds", agents + "steps:\n  - agent: a\n    run: w\n", 9, 5, "exactly one of"},
		{"unknown top key", agents + "step:\n  - agent: a\n", 8, 1, "step: unknown key"},
		{"no steps", agents, 1, 1, "steps: required"},
		{"unknown spec field", "agents:\n  a:\n    model: scripted\n    script: [x]\n    temperature: 2\nsteps:\n  - agent: a\n", 5, 5, `agents.a: rath: invalid agent spec: json: unknown field "temperature"`},
		{"bad spec field", "agents:\n  a:\n    model: scripted\n    script: [x]\n    limits: {max_tool_rounds: -1}\nsteps:\n  - agent: a\n", 5, 14, "limits.max_tool_rounds: must be ≥ 0"},
		{"cycle", agents + "workflows:\n  w1:\n    steps: [{run: w2}]\n  w2:\n    steps: [{agent: a}, {fork: {branches: [b, w1]}}]\n" + "steps:\n  - run: w1\n",
			12, 47, "cycle: workflow w1 → w2 → w1"},
		{"self reference", agents + "workflows:\n  w:\n    steps: [{run: w}]\n" + "steps:\n  - run: w\n", 10, 19, "cycle: workflow w → w"},
		{"agent is not a workflow", agents + "steps:\n  - run: a\n", 9, 10, `"a" is an agent, not a workflow`},
		{"workflow shadows agent", agents + "workflows:\n  a:\n    steps: [{agent: b}]\nsteps:\n  - agent: a\n", 9, 3, "already an agent"},
		{"alias", "agents:\n  a: &x\n    model: scripted\n    script: [x]\n  b: *x\nsteps:\n  - agent: a\n", 5, 6, "aliases"},
		{"file ref without dir", "agents:\n  a: a.yaml\nsteps:\n  - agent: a\n", 2, 6, "inline the agent"},
		{"not yaml", "steps: [", 0, 0, "not YAML"},
		{"compress unknown", agents + "steps:\n  - compress: {agent: nope}\n", 9, 23, `unknown agent "nope"`},
		{"bad sandbox", "agents:\n  a:\n    model: scripted\n    script: [x]\n    sandbox: {backend: vm}\nsteps:\n  - agent: a\n", 5, 15, `sandbox.backend: "vm" is not a sandbox backend`},
		{"sandbox without backend", "agents:\n  a:\n    model: scripted\n    script: [x]\n    sandbox:\n      image: rath-sandbox:busybox\nsteps:\n  - agent: a\n", 5, 5, "sandbox.backend: required"},
		{"sandbox bad network", "agents:\n  a:\n    model: scripted\n    script: [x]\n    sandbox:\n      backend: docker\n      network: open\nsteps:\n  - agent: a\n", 7, 7, `sandbox.network: "open" is not none or egress`},
		{"sandbox local image", agents + "  c:\n    model: scripted\n    script: [x]\n    sandbox:\n      backend: local\n      image: alpine\nsteps:\n  - agent: c\n", 13, 7, "sandbox.image: the local backend takes no image"},
		{"sandbox bad timeout", "agents:\n  a:\n    model: scripted\n    script: [x]\n    sandbox: {backend: docker, timeout_seconds: -1}\nsteps:\n  - agent: a\n", 5, 32, "sandbox.timeout_seconds: must be in 0..604800"},
		{"sandbox unknown field", "agents:\n  a:\n    model: scripted\n    script: [x]\n    sandbox:\n      backend: docker\n      cpus: 2\nsteps:\n  - agent: a\n", 7, 7, `unknown field "cpus"`},
		{"sandbox not a mapping", "agents:\n  a:\n    model: scripted\n    script: [x]\n    sandbox: docker\nsteps:\n  - agent: a\n", 5, 5, "agents.a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := flowfile.Parse("wf.yaml", []byte(tc.doc), nil)
			var fe *flowfile.Error
			if !errors.As(err, &fe) || !errors.Is(err, flowfile.ErrInvalid) {
				t.Fatalf("error %v (%T), want a *flowfile.Error", err, err)
			}
			if fe.Line != tc.line || fe.Column != tc.col {
				t.Errorf("position %d:%d, want %d:%d (%v)", fe.Line, fe.Column, tc.line, tc.col, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			if tc.line > 0 && !strings.HasPrefix(err.Error(), fmt.Sprintf("wf.yaml:%d:%d: ", tc.line, tc.col)) {
				t.Errorf("error %q does not start with file:line:col", err)
			}
		})
	}
}

func offline() flow.Env {
	return flow.Env{Resolve: func(s agent.Spec) (llm.Provider, string, error) {
		return &llm.Scripted{Replies: s.Script}, llm.ScriptedModel, nil
	}}
}

func run(t *testing.T, wf flow.Workflow, msg string) []string {
	t.Helper()
	ctx := context.Background()
	rt, err := flow.NewLocal("ff", offline())
	if err != nil {
		t.Fatal(err)
	}
	in, err := session.FromUserMessage(ctx, session.NewMemoryGraph(), msg)
	if err != nil {
		t.Fatal(err)
	}
	out, err := flow.Run(ctx, rt, wf, in)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := out.Chunks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cs {
		got = append(got, c.String())
	}
	return got
}

// TestTriageExample loads examples/workflows/triage.yaml, builds it and
// runs it in-process: the router sends the ticket to billing, then to the
// writer, then stops.
func TestTriageExample(t *testing.T) {
	t.Parallel()
	f, err := flowfile.Load(filepath.Join("..", "..", "examples", "workflows", "triage.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	wf, err := f.Build()
	if err != nil {
		t.Fatal(err)
	}
	got := run(t, wf, "I was charged twice.")
	var said []string
	choices := 0
	for _, c := range got {
		if strings.HasPrefix(c, "selector_decision") {
			choices++
		} else {
			said = append(said, c)
		}
	}
	want := []string{"user: I was charged twice.", "assistant: The duplicate charge of 42.00 EUR was refunded.",
		"assistant: We refunded the duplicate charge; it will reach your card in 3 days."}
	if fmt.Sprint(said) != fmt.Sprint(want) || choices != 3 {
		t.Fatalf("transcript %q (%d decisions), want %q and 3 decisions", said, choices, want)
	}
}

// TestEveryStepKind builds a file using every step kind, with file
// references and a script file, runs it, and checks Encode gives a
// self-contained file that parses and runs the same.
func TestEveryStepKind(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("critic.yaml", "model: scripted\nscript_file: critic-script.yaml\n")
	write("critic-script.yaml", "- x\n- ok\n- ok\n- ok\n- ok\n- ok\n")
	write("wf.yaml", `name: every-kind
agents:
  writer:
    model: scripted
    script: [draft, x, x, x, x, x, x, x]
    description: writes drafts
  critic: {file: critic.yaml, description: reviews drafts}
  router:
    model: scripted
    script: [x, x, x, x, "1", "-1"]
  squash:
    model: scripted
    script: [x, x, x, x, x, summary]
workflows:
  review:
    description: a second opinion
    steps:
      - agent: critic
steps:
  - agent: writer
  - fork: {n: 2, agent: critic}
  - sequence:
      - fork: {branches: [review], limit: 1}
  - select: {selector: router, candidates: [writer, review], max_rounds: 3}
  - compress: {agent: squash, instruction: Be brief.}
`)
	f, err := flowfile.Load(filepath.Join(dir, "wf.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	wf, err := f.Build()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`summary: {"content":"summary"}`}
	if got := run(t, wf, "write"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("output %q, want %q", got, want)
	}
	enc, err := f.Encode()
	if err != nil {
		t.Fatal(err)
	}
	g, err := flowfile.Parse("encoded", enc, nil)
	if err != nil {
		t.Fatalf("encoded file does not parse: %v\n%s", err, enc)
	}
	again, err := g.Encode()
	if err != nil || string(again) != string(enc) {
		t.Fatalf("encode is not stable:\n%s\n---\n%s", enc, again)
	}
	wf2, err := g.Build()
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, wf2, "write"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("encoded file output %q, want %q", got, want)
	}
}
