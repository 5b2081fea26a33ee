package app_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/sandbox/docker"
	"github.com/rath-run/rath/pkg/session"
)

// TestDevRunPlacedOnDocker: a session placed on "docker" runs its tools in
// a hardened container: a non-root user, no network, no privileges, and
// the file a tool wrote visible to the next tool.
func TestDevRunPlacedOnDocker(t *testing.T) {
	t.Parallel()
	testenv.RequireDocker(t, docker.DefaultImage)
	s := startDev(t, "", app.DevConfig{Workers: 1})
	ctx := context.Background()
	in, err := session.FromUserMessage(ctx, s.dev.Backend.Store, "Where am I running?")
	if err != nil {
		t.Fatal(err)
	}
	in, err = in.To(ctx, session.Placement{Backend: docker.Name})
	if err != nil {
		t.Fatal(err)
	}
	spec := `{
  "name": "inspector", "model": "scripted", "tools": ["builtin"],
  "script": [
    {"tool_calls": [{"function": {"name": "write_workspace_file", "arguments": {"path": "note.txt", "content": "from the tool"}}}]},
    {"tool_calls": [{"function": {"name": "run_shell_command", "arguments": {"cmd": "id -u; pwd; cat note.txt; echo; grep -E '^(NoNewPrivs|CapEff):' /proc/self/status; ls /sys/class/net; touch /etc/x"}}}]},
    {"content": "Inspected."}
  ]
}`
	var r runs.Run
	if err := s.cl.Do(ctx, "POST", "/v1/runs", map[string]any{"agent": json.RawMessage(spec), "session": in.Version().ID.String()}, &r); err != nil {
		t.Fatalf("submit: %v", err)
	}
	r = s.waitRun(t, r.ID)
	if r.Status != runs.RunSucceeded || r.Output == nil {
		t.Fatalf("run ended %s (%s)", r.Status, r.Error)
	}
	out, err := session.Open(ctx, s.dev.Backend.Store, *r.Output)
	if err != nil {
		t.Fatal(err)
	}
	v := out.Version()
	if v.Placement.Backend != docker.Name {
		t.Errorf("placement %+v, want docker kept", v.Placement)
	}
	var shell string
	for _, c := range v.Chunks {
		if tr, ok := c.ToolResult(); ok && strings.Contains(tr.Content, "stdout") {
			shell = tr.Content
		}
	}
	for _, want := range []string{`65534\n/workspace\nfrom the tool\n`, `NoNewPrivs:\t1`, `CapEff:\t0000000000000000`, `\nlo\n`, `Read-only file system`} {
		if !strings.Contains(shell, want) { // want is JSON-escaped, as the result is
			t.Errorf("shell result lacks %q:\n%s", want, shell)
		}
	}
}
