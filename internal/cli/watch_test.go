package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testenv"
)

// TestRunsWatchFinished re-attaches to a run that has already finished:
// rathctl runs watch prints its whole story from the stored events (the
// reply's tokens among them), its final state and its answer; an unknown
// run is an error.
func TestRunsWatchFinished(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, err := app.StartDev(context.Background(), app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	spec := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(spec, []byte("name: quick\nmodel: scripted\nscript:\n  - content: the quick reply\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var r runs.Run
	okJSON(t, &r, "run", "--agent", spec, "--message", "hello", "--server", d.URL)
	testenv.Eventually(t, 30*time.Second, "the run to end", func() bool {
		okJSON(t, &r, "runs", "show", r.ID, "--server", d.URL)
		return r.Status.Terminal()
	})
	code, out, errOut := rathctl(t, "", "runs", "watch", r.ID, "--server", d.URL)
	if code != 0 {
		t.Fatalf("runs watch: exit %d: %s", code, errOut)
	}
	at := 0
	for _, want := range []string{"run.submitted", "step.started", "the quick reply\n", "step.committed", "run.completed",
		"run " + r.ID + " succeeded", "answer: the quick reply"} {
		i := strings.Index(out[at:], want)
		if i < 0 {
			t.Fatalf("runs watch of a finished run: %q missing (in order) from:\n%s", want, out)
		}
		at += i + len(want)
	}
	if code, out, errOut := rathctl(t, "", "runs", "watch", "run_nope", "--server", d.URL); code != 4 || out != "" || !strings.Contains(errOut, "not found") {
		t.Fatalf("runs watch of an unknown run: exit %d, stdout %q, stderr %q; want 4, nothing printed, not found", code, out, errOut)
	}
}
