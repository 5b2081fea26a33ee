package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/app"
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
// there are; rathctl exits 2.
func TestRunRefusesAnUnknownToolAtSubmit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	d, err := app.StartDev(ctx, app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", Workers: 1, StoreURL: "sqlite:" + filepath.Join(dir, "rath.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	path := filepath.Join(dir, "typo.yaml")
	doc := "name: typo\nmodel: scripted\nscript: [hi]\ntools: [read_workspace_file, teleport]\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := rathctl(t, "", "run", "--agent", path, "-m", "hi", "--server", d.URL)
	if code != 2 {
		t.Fatalf("exit %d, want 2; stdout %q stderr %q", code, out, errOut)
	}
	for _, want := range []string{path + ": ", "agent.tools[1]", `unknown tool "teleport"`, "read_workspace_file"} {
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
