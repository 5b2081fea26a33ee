package replay

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/flowfile"
)

const overrideSrc = `
agents:
  router: {model: scripted, instructions: ROUTER, script: ["0"]}
  writer:
    model: gpt-a
    instructions: WRITER
    description: writes the answer
steps:
  - select: {selector: router, candidates: [writer], max_rounds: 2}
`

func TestOverrideWorkflow(t *testing.T) {
	out, err := OverrideWorkflow(overrideSrc, "gpt-b", map[string]json.RawMessage{
		"writer": json.RawMessage(`{"name": "writer", "model": "gpt-c", "instructions": "NEW WRITER"}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := flowfile.Parse("rerun", []byte(out), nil)
	if err != nil {
		t.Fatalf("parse %s: %v", out, err)
	}
	if _, err := f.Build(); err != nil {
		t.Fatal(err)
	}
	// --model applies after the replacement: every agent is on gpt-b, the
	// router's script is dropped, the writer keeps its description.
	for _, want := range []string{"model: gpt-b", "NEW WRITER", "description: writes the answer"} {
		if !strings.Contains(out, want) {
			t.Errorf("override lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{"script:", "gpt-a", "gpt-c"} {
		if strings.Contains(out, bad) {
			t.Errorf("override still has %q:\n%s", bad, out)
		}
	}
	if same, err := OverrideWorkflow(overrideSrc, "", nil); err != nil || same != overrideSrc {
		t.Errorf("no override changed the text: %v", err)
	}
	for name, tc := range map[string]struct {
		text   string
		agents map[string]json.RawMessage
	}{
		"unknown agent":   {overrideSrc, map[string]json.RawMessage{"critic": json.RawMessage(`{"model": "x"}`)}},
		"not a mapping":   {overrideSrc, map[string]json.RawMessage{"writer": json.RawMessage(`[1]`)}},
		"no agents":       {"steps: []\n", map[string]json.RawMessage{"writer": json.RawMessage(`{}`)}},
		"a list document": {"- 1\n", map[string]json.RawMessage{"writer": json.RawMessage(`{}`)}},
	} {
		if _, err := OverrideWorkflow(tc.text, "", tc.agents); !errors.Is(err, ErrBadRerun) {
			t.Errorf("%s: err = %v, want ErrBadRerun", name, err)
		}
	}
	if _, err := OverrideWorkflow("agents:\n  w: agents/w.yaml\n", "gpt-b", nil); !errors.Is(err, ErrBadRerun) {
		t.Errorf("file reference with --model: err = %v, want ErrBadRerun", err)
	}
}

func FuzzOverrideWorkflow(f *testing.F) {
	f.Add(overrideSrc, "gpt-b", "writer", `{"model": "m"}`)
	f.Add("agents: {a: {model: x}}", "", "a", `{}`)
	f.Add(": : :", "m", "", "")
	f.Fuzz(func(t *testing.T, text, model, name, spec string) {
		agents := map[string]json.RawMessage{}
		if name != "" {
			agents[name] = json.RawMessage(spec)
		}
		out, err := OverrideWorkflow(text, model, agents)
		if err == nil && model == "" && len(agents) == 0 && out != text {
			t.Fatalf("no override changed the text")
		}
	})
}
