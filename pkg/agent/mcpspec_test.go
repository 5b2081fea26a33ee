package agent

import (
	"errors"
	"strings"
	"testing"
)

func TestParseSpecMCP(t *testing.T) {
	t.Parallel()
	s, err := ParseSpec([]byte(`
name: a
model: gpt-x
mcp:
  - name: files
    command: ./server
    args: [--root, /data]
    env: {LOG_LEVEL: debug}
    tools: [read]
    timeout_seconds: 5
`))
	if err != nil {
		t.Fatal(err)
	}
	m := s.MCP[0]
	if m.Name != "files" || m.Command != "./server" || len(m.Args) != 2 || m.Env["LOG_LEVEL"] != "debug" ||
		m.Tools[0] != "read" || m.TimeoutSeconds != 5 {
		t.Fatalf("parsed %+v", m)
	}
}

func TestParseSpecMCPInvalid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, mcp, want string }{
		{"no name", `[{command: x}]`, "mcp[0].name: required"},
		{"bad name", `[{name: Files, command: x}]`, "mcp[0].name"},
		{"underscore", `[{name: a_b, command: x}]`, "mcp[0].name"},
		{"long name", `[{name: ` + strings.Repeat("a", 25) + `, command: x}]`, "mcp[0].name"},
		{"no command", `[{name: a}]`, "mcp[0].command: required"},
		{"blank command", `[{name: a, command: "  "}]`, "mcp[0].command: required"},
		{"duplicate", `[{name: a, command: x}, {name: a, command: y}]`, "mcp[1].name"},
		{"env key", `[{name: a, command: x, env: {"A=B": c}}]`, "mcp[0].env"},
		{"env nul", `[{name: a, command: x, env: {A: "\0"}}]`, "mcp[0].env.A"},
		{"arg nul", `[{name: a, command: x, args: [ok, "\0"]}]`, "mcp[0].args[1]"},
		{"timeout", `[{name: a, command: x, timeout_seconds: -1}]`, "mcp[0].timeout_seconds"},
		{"empty tool", `[{name: a, command: x, tools: [""]}]`, "mcp[0].tools[0]"},
		{"unknown field", `[{name: a, command: x, cmd: y}]`, "cmd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseSpec([]byte("name: a\nmodel: m\nmcp: " + tc.mcp + "\n"))
			if !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// FuzzParseSpec decodes arbitrary documents as agent specs: never a panic,
// and what parses validates, MCP entries included.
func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{
		"name: a\nmodel: gpt-x\n",
		"name: a\nmodel: scripted\nscript: [hi]\n",
		"name: a\nmodel: m\nmcp: [{name: files, command: ./server, args: [--root, /d], env: {K: V}, tools: [read], timeout_seconds: 5}]\n",
		`{"name":"a","model":"m","mcp":[{"name":"x","command":"c"},{"name":"x","command":"d"}]}`,
		"name: a\nmodel: m\nmcp: [{name: a_b, command: x}]\n",
		"name: a\nmodel: m\nmcp: {name: a}\n",
		"mcp: [[[\n",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseSpec(b)
		if err != nil {
			if !errors.Is(err, ErrInvalidSpec) {
				t.Fatalf("error %v does not wrap ErrInvalidSpec", err)
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("parsed spec does not validate: %v", err)
		}
		for i := range s.MCP {
			if err := s.MCP[i].Validate(); err != nil {
				t.Fatalf("mcp[%d] does not validate: %v", i, err)
			}
		}
	})
}
