package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunRefusesABadToolPolicy: rathctl run checks the spec before it
// talks to a server; a bad policy exits 2 naming the field.
func TestRunRefusesABadToolPolicy(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct{ policy, want string }{
		"limit":   {"{max_calls: {run_shell_command: 0}}", "policy.max_calls.run_shell_command: must be in 1..1000000, got 0"},
		"pattern": {"{command_deny: [rm, 'r*m']}", `policy.command_deny[1]: "r*m"`},
	} {
		path := filepath.Join(dir, name+".yaml")
		spec := "name: p\nmodel: scripted\nscript: [{content: hi}]\ntools: [builtin]\npolicy: " + tc.policy + "\n"
		if err := os.WriteFile(path, []byte(spec), 0o600); err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		code := Main(context.Background(), []string{"run", "--server", "http://127.0.0.1:1", "--agent", path, "--message", "x"},
			strings.NewReader(""), &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want 2 and %q", name, code, errOut.String(), tc.want)
		}
	}
}
