package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
