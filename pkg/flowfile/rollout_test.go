package flowfile_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/flowfile"
)

// TestRolloutErrors: a bad rollout step is refused with the file, line,
// column and field.
func TestRolloutErrors(t *testing.T) {
	t.Parallel()
	wf := agents + "workflows:\n  w:\n    steps: [{agent: a}]\n"
	for _, tc := range []struct {
		name, doc string
		line, col int
		want      string
	}{
		{"no verifier", agents + "steps:\n  - rollout: {n: 2, agent: a}\n", 9, 14, "steps[0].rollout.verifier: required"},
		{"n zero", agents + "steps:\n  - rollout: {n: 0, agent: a, verifier: 'true'}\n", 9, 18, "steps[0].rollout.n: 0 is outside 1..1000"},
		{"no agent", agents + "steps:\n  - rollout: {n: 2, verifier: 'true'}\n", 9, 14, "steps[0].rollout.agent: required"},
		{"both", agents + "steps:\n  - rollout: {n: 2, agent: a, branches: [b], verifier: 'true'}\n", 9, 14, "not both"},
		{"unknown agent", agents + "steps:\n  - rollout: {branches: [a, zed], verifier: 'true'}\n", 9, 29, `steps[0].rollout.branches[1]: unknown agent "zed"`},
		{"workflow branch", wf + "steps:\n  - rollout: {n: 2, agent: w, verifier: 'true'}\n", 12, 28, `steps[0].rollout.agent: "w" is a workflow, not an agent`},
		{"empty command", agents + "steps:\n  - rollout: {n: 2, agent: a, verifier: ' '}\n", 9, 41, "steps[0].rollout.verifier: required"},
		{"no command", agents + "steps:\n  - rollout: {n: 2, agent: a, verifier: {timeout_seconds: 3}}\n", 9, 41, "steps[0].rollout.verifier.command: required"},
		{"bad timeout", agents + "steps:\n  - rollout:\n      n: 2\n      agent: a\n      verifier:\n        command: make test\n        timeout_seconds: 9999\n", 14, 26, "steps[0].rollout.verifier.timeout_seconds: 9999 is outside 0..3600"},
		{"timeout not a number", agents + "steps:\n  - rollout:\n      n: 2\n      agent: a\n      verifier: {command: x, timeout_seconds: soon}\n", 12, 47, "verifier.timeout_seconds: must be a number"},
		{"unknown verifier key", agents + "steps:\n  - rollout: {n: 2, agent: a, verifier: {command: x, image: alpine}}\n", 9, 54, "steps[0].rollout.verifier.image: unknown key (allowed: command, timeout_seconds)"},
		{"command not a string", agents + "steps:\n  - rollout: {n: 2, agent: a, verifier: [make]}\n", 9, 41, "steps[0].rollout.verifier: must be a string"},
		{"limit", agents + "steps:\n  - rollout: {n: 2, agent: a, limit: 0, verifier: x}\n", 9, 38, "steps[0].rollout.limit: 0 is outside"},
		{"unknown key", agents + "steps:\n  - rollout: {n: 2, agent: a, verifier: x, score: max}\n", 9, 44, "steps[0].rollout.score: unknown key"},
		{"unknown selector", agents + "steps:\n  - rollout: {n: 2, agent: a, selector: judge}\n", 9, 41, `steps[0].rollout.selector: unknown agent "judge"`},
		{"selector too many", agents + "steps:\n  - rollout: {n: 65, agent: a, selector: b}\n", 9, 42, "steps[0].rollout.selector: a selector chooses among at most 64 branches"},
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
			if !strings.HasPrefix(err.Error(), fmt.Sprintf("wf.yaml:%d:%d: ", tc.line, tc.col)) {
				t.Errorf("error %q does not start with file:line:col", err)
			}
		})
	}
}

// TestRolloutParseBuildEncode: both forms parse, build a flow.Rollout of
// the named agents with the verifier, and encode to a file that parses
// the same.
func TestRolloutParseBuildEncode(t *testing.T) {
	t.Parallel()
	doc := agents + `steps:
  - rollout:
      n: 3
      agent: a
      limit: 2
      verifier: {command: "test -f answer.txt", timeout_seconds: 30}
  - rollout: {branches: [a, b], verifier: ./check.sh}
  - rollout: {n: 2, agent: b, selector: a}
`
	f, err := flowfile.Parse("wf.yaml", []byte(doc), nil)
	if err != nil {
		t.Fatal(err)
	}
	r0, r1 := f.Steps[0].Rollout, f.Steps[1].Rollout
	if r0 == nil || r0.N != 3 || r0.Agent != "a" || r0.Limit != 2 || r0.Verifier != (flow.Verifier{Command: "test -f answer.txt", TimeoutSeconds: 30}) {
		t.Fatalf("step 0: %+v", r0)
	}
	if r1 == nil || fmt.Sprint(r1.Branches) != "[a b]" || r1.Verifier.Command != "./check.sh" {
		t.Fatalf("step 1: %+v", r1)
	}
	wf, err := f.Build()
	if err != nil {
		t.Fatal(err)
	}
	steps := wf.(*flowfile.Named).Steps
	b0, ok := steps[0].(*flow.Rollout)
	if !ok || len(b0.Branches) != 3 || b0.Branches[2].Spec.Name != "a" || b0.Limit != 2 || b0.Verifier.TimeoutSeconds != 30 {
		t.Fatalf("built step 0: %#v", steps[0])
	}
	b1 := steps[1].(*flow.Rollout)
	if len(b1.Branches) != 2 || b1.Branches[1].Spec.Name != "b" || b1.Selector != nil {
		t.Fatalf("built step 1: %#v", b1)
	}
	if b2 := steps[2].(*flow.Rollout); b2.Selector == nil || b2.Selector.Spec.Name != "a" || b2.Verifier.Command != "" {
		t.Fatalf("built step 2: %#v", b2)
	}
	enc, err := f.Encode()
	if err != nil {
		t.Fatal(err)
	}
	g, err := flowfile.Parse("encoded", enc, nil)
	if err != nil {
		t.Fatalf("encoded file does not parse: %v\n%s", err, enc)
	}
	if r2 := g.Steps[2].Rollout; r2 == nil || r2.Selector != "a" || r2.Verifier.Command != "" || r2.N != 2 {
		t.Fatalf("encoded selector rollout %+v\n%s", r2, enc)
	}
	if fmt.Sprint(*g.Steps[0].Rollout) != fmt.Sprint(*r0) || fmt.Sprint(*g.Steps[1].Rollout) != fmt.Sprint(*r1) {
		t.Fatalf("encoded rollouts %+v %+v, want %+v %+v\n%s", *g.Steps[0].Rollout, *g.Steps[1].Rollout, *r0, *r1, enc)
	}
}
