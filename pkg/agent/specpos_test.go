package agent

import (
	"errors"
	"strings"
	"testing"
)

// TestParseSpecFileLocatesErrors checks that agent spec errors name the
// file, the line and column of the field, and the field, like workflow
// file errors.
func TestParseSpecFileLocatesErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"unknown top-level field", "name: a\nmodel: scripted\nscript: [hi]\nfoo: 1\n",
			`a.yaml:4:1: foo: unknown field "foo"`},
		{"unknown nested field", "name: a\nmodel: m\nlimits:\n  max_tool_round: 3\n",
			`a.yaml:4:3: limits.max_tool_round: unknown field "max_tool_round"`},
		{"bad value", "name: a\nmodel: m\nlimits:\n  max_tool_rounds: -1\n",
			`a.yaml:4:3: limits.max_tool_rounds: must be ≥ 0, got -1`},
		{"wrong type", "name: a\nmodel: m\nlimits:\n  max_tool_rounds: many\n",
			`a.yaml:4:3: limits.max_tool_rounds: `},
		{"list element", "name: a\nmodel: m\nmcp:\n  - {name: x, command: c}\n  - {name: x, command: d}\n",
			`a.yaml:5:6: mcp[1].name: "x" is already the name of mcp[0]`},
		{"required field", "name: a\n",
			`a.yaml:1:1: model: required`},
		{"empty tool name", "name: a\nmodel: m\ntools:\n  - builtin\n  - \"\"\n",
			`a.yaml:5:5: tools[1]: empty tool name`},
		{"syntax", "name: a\nmodel: [m\n",
			`a.yaml:`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSpecFile("a.yaml", []byte(tc.doc))
			if err == nil {
				t.Fatal("parsed")
			}
			var se *SpecError
			if !errors.As(err, &se) || !errors.Is(err, ErrInvalidSpec) {
				t.Fatalf("error %v (%T) is not a *SpecError wrapping ErrInvalidSpec", err, err)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error:\n got  %s\n want %s…", err, tc.want)
			}
		})
	}
	if _, err := ParseSpecFile("a.yaml", []byte("name: a\nmodel: scripted\nscript: [hi]\n")); err != nil {
		t.Fatalf("a good spec: %v", err)
	}
}

// FuzzParseSpecFile: any document either parses or fails with a
// *SpecError inside the document (never a panic, never a line past its
// end), and ParseSpecFile agrees with ParseSpec.
func FuzzParseSpecFile(f *testing.F) {
	for _, s := range []string{
		"name: a\nmodel: scripted\nscript: [hi]\nfoo: 1\n",
		"name: a\nmodel: m\nlimits:\n  max_tool_rounds: -1\n",
		"name: a\nmodel: m\nmcp:\n  - {name: x, command: c}\n  - {name: x, command: d}\n",
		"name: a\nmodel: [m\n",
		`{"name":"a","model":"m","tools":["", "x"]}`,
		"- a\n- b\n",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := ParseSpecFile("f.yaml", b)
		_, plain := ParseSpec(b)
		if (err == nil) != (plain == nil) {
			t.Fatalf("ParseSpecFile error %v, ParseSpec error %v", err, plain)
		}
		if err == nil {
			return
		}
		var se *SpecError
		if !errors.As(err, &se) {
			t.Fatalf("error %v (%T) is not a *SpecError", err, err)
		}
		if lines := strings.Count(strings.NewReplacer("\r\n", "\n", "\r", "\n", "\u0085", "\n", "\u2028", "\n", "\u2029", "\n").Replace(string(b)), "\n") + 1; se.Line < 0 || se.Line > lines {
			t.Fatalf("line %d outside a %d-line document: %v", se.Line, lines, err)
		}
	})
}
