package cli

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/app/apptest"
	"github.com/rath-run/rath/internal/coordinator"
	"github.com/rath-run/rath/internal/runs"
)

// TestRunRefusesABadSpecWithItsPosition: `rathctl run --agent FILE` with a
// spec error exits 2 before it contacts any server, naming the file, the
// line and column and the field, as workflow file errors do.
func TestRunRefusesABadSpecWithItsPosition(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.yaml")
	doc := "name: a\nmodel: scripted\nscript: [hi]\nlimits:\n  max_tool_rounds: -1\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	// No server listens there: the spec must be refused first.
	code, out, errOut := rathctl(t, "", "run", "--agent", path, "-m", "hi", "--server", "http://127.0.0.1:1")
	if code != 2 {
		t.Fatalf("exit %d, want 2; stdout %q stderr %q", code, out, errOut)
	}
	if want := path + ":5:3: limits.max_tool_rounds: must be ≥ 0, got -1"; !strings.Contains(errOut, want) {
		t.Errorf("stderr %q does not contain %q", errOut, want)
	}
}

// TestRunRefusesAnUnknownToolAtSubmit: on the dev stack, whose coordinator
// knows its workers' tools, a spec naming a tool no worker offers is
// refused at submit (no run is recorded), naming the field and the tools
// there are; rathctl exits 2 naming the file, line and column.
func TestRunRefusesAnUnknownToolAtSubmit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	d := apptest.Dev(t, dir)
	path := filepath.Join(dir, "typo.yaml")
	doc := "name: typo\nmodel: scripted\nscript: [hi]\ntools: [read_workspace_file, teleport]\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := rathctl(t, "", "run", "--agent", path, "-m", "hi", "--server", d.URL)
	if code != 2 {
		t.Fatalf("exit %d, want 2; stdout %q stderr %q", code, out, errOut)
	}
	for _, want := range []string{path + `:4:30: tools[1]: unknown tool "teleport"`, "read_workspace_file"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr %q does not contain %q", errOut, want)
		}
	}
	list, err := d.Backend.Runs.List(ctx, runs.ListParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 0 {
		t.Errorf("a refused submit recorded %d runs: %+v", len(list), list)
	}
}

// TestRunRefusesWhatTheWorkersDoNotOffer: a cluster's coordinator, told
// what its workers offer (the built-ins, the operator's extra tool
// season_for, one MCP command) and with authentication on, refuses at
// submit an agent spec naming another tool or an MCP server running another
// command, and a workflow file whose agent does; rathctl exits 2 with the
// file, the line and column and the field. A spec naming season_for and
// the allowed command is accepted.
func TestRunRefusesWhatTheWorkersDoNotOffer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	d, err := app.StartDev(ctx, app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", Workers: -1, StoreURL: "sqlite:" + filepath.Join(dir, "rath.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	tools, err := app.ToolOffer("season_for")
	if err != nil {
		t.Fatal(err)
	}
	const token = "rath_test_offer_token_0123456789"
	c, err := coordinator.New(d.Backend.Store, d.Backend.Runs, d.Backend.Bus, coordinator.Config{
		Token: token, RequireAuth: true, Tools: tools, MCP: app.MCPOffer("/usr/local/bin/mcp-files")})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	write := func(name, doc string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tool := write("tool.yaml", "name: a\nmodel: scripted\nscript: [hi]\ntools:\n  - builtin\n  - season_for\n  - teleport\n")
	mcp := write("mcp.yaml", "name: a\nmodel: scripted\nscript: [hi]\nmcp:\n  - name: files\n    command: /usr/local/bin/mcp-files\n"+
		"  - name: shell\n    command: /bin/sh\n")
	flow := write("flow.yaml", "agents:\n  planner:\n    model: scripted\n    script: [x]\n  coder:\n    model: scripted\n"+
		"    tools: [builtin, teleport]\n    script: [x]\nsteps:\n  - agent: planner\n  - agent: coder\n")
	for _, tc := range []struct{ file, want string }{
		{tool, tool + `:7:5: tools[2]: unknown tool "teleport" (the workers offer: `},
		{mcp, mcp + `:8:5: mcp[1].command: "/bin/sh" is not allowed by the operator's MCP policy (RATH_MCP_ALLOW allows: /usr/local/bin/mcp-files)`},
		{flow, flow + `:7:22: agents.coder.tools[1]: unknown tool "teleport"`},
	} {
		code, out, errOut := rathctl(t, "", "run", tc.file, "-m", "hi", "--server", srv.URL, "--token", token)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("run %s: exit %d, stdout %q stderr %q; want exit 2 and %q", filepath.Base(tc.file), code, out, errOut, tc.want)
		}
	}
	list, err := d.Backend.Runs.List(ctx, runs.ListParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 0 {
		t.Errorf("refused submits recorded %d runs: %+v", len(list), list)
	}
	ok := write("ok.yaml", "name: a\nmodel: scripted\nscript: [hi]\ntools: [builtin, season_for]\n"+
		"mcp:\n  - name: files\n    command: /usr/local/bin/mcp-files\n")
	if code, out, errOut := rathctl(t, "", "run", ok, "-m", "hi", "--server", srv.URL, "--token", token); code != 0 {
		t.Errorf("run ok.yaml: exit %d, stdout %q stderr %q; want it accepted", code, out, errOut)
	}
}
