package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/app"
)

// TestRunWorkflowFile runs the triage example through `rathctl run FILE
// --watch` on a dev stack, and checks that an invalid workflow file is
// refused with its line before anything is submitted.
func TestRunWorkflowFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, err := app.StartDev(context.Background(), app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	triage := filepath.Join("..", "..", "examples", "workflows", "triage.yaml")
	code, out, errOut := rathctl(t, "", "run", triage, "--message", "I was charged twice.", "--watch", "--server", d.URL)
	if code != 0 {
		t.Fatalf("run triage.yaml: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	if !strings.Contains(out, "succeeded") || strings.Count(out, "step.committed") != 5 {
		t.Fatalf("want 5 committed steps and success:\n%s", out)
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("agents:\n  a: {model: scripted, script: [x]}\nsteps:\n  - select: {selector: a, candidates: [a]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = rathctl(t, "", "run", bad, "--message", "hi", "--server", d.URL)
	if code != 2 || !strings.Contains(errOut, "max_rounds") || !strings.Contains(errOut, ":4:") {
		t.Fatalf("bad workflow: exit %d, stderr %q; want exit 2 naming max_rounds at line 4", code, errOut)
	}
	code, _, errOut = rathctl(t, "", "run", triage, "--agent", triage, "--message", "hi", "--server", d.URL)
	if code != 2 || !strings.Contains(errOut, "not both") {
		t.Fatalf("file twice: exit %d, stderr %q", code, errOut)
	}
}
