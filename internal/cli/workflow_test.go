package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/pkg/flowfile"
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

// TestSelfContained: a workflow file that needs nothing beside it is
// submitted as written (so the lines the coordinator names are its own);
// one that refers to an agent file is submitted encoded, the agent inline.
func TestSelfContained(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	inline := "# as written\nagents:\n  a:\n    model: scripted\n    script: [x]\n    sandbox: {backend: docker}\nsteps:\n  - agent: a\n"
	write("a.yaml", "model: scripted\nscript: [x]\nsandbox: {backend: docker}\n")
	for _, tc := range []struct {
		name, body string
		asWritten  bool
	}{
		{"inline.yaml", inline, true},
		{"ref.yaml", "agents:\n  a: a.yaml\nsteps:\n  - agent: a\n", false},
	} {
		p := write(tc.name, tc.body)
		f, err := flowfile.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		doc, asIs, err := selfContained(p, f)
		if err != nil {
			t.Fatal(err)
		}
		if asIs != tc.asWritten {
			t.Errorf("%s: selfContained says as written = %v, want %v", tc.name, asIs, tc.asWritten)
		}
		if got := string(doc) == tc.body; got != tc.asWritten {
			t.Errorf("%s: submitted as written = %v, want %v:\n%s", tc.name, got, tc.asWritten, doc)
		}
		g, err := flowfile.Parse("submitted", doc, nil)
		if err != nil || g.Agents["a"].Spec.Sandbox == nil || g.Agents["a"].Spec.Sandbox.Backend != "docker" {
			t.Errorf("%s: the submitted file does not parse with its sandbox block: %v\n%s", tc.name, err, doc)
		}
	}
}
