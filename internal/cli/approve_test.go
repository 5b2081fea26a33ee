package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/sandbox/sandboxtest"
)

// TestApproveRejectCommands drives two gated runs on a dev stack with
// rathctl: run --watch stops at the wait (exit 3), approve resumes one,
// reject --watch (which needs --reason) the other and follows it to its
// answer, and errors carry exit codes.
func TestApproveRejectCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, err := app.StartDev(context.Background(), app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	// The tool writes the marker outside its workspace: a root worker runs
	// local tools as nobody, so its directory must be writable by them.
	markerDir := sandboxtest.Dir(t)
	if err := os.Chmod(markerDir, 0o777); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(markerDir, "marker")
	spec := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(spec, fmt.Appendf(nil, `name: deployer
model: scripted
tools: [run_shell_command]
approve: [run_shell_command]
script:
  - tool_calls: [{id: sh1, function: {name: run_shell_command, arguments: {cmd: "echo ran >> %s"}}}]
  - Done.
`, marker), 0o600); err != nil {
		t.Fatal(err)
	}

	start := func() string {
		t.Helper()
		code, out, errOut := rathctl(t, "", "run", "--agent", spec, "--message", "ship", "--watch", "--server", d.URL)
		if code != 3 || !strings.Contains(errOut, "waiting for approval") || !strings.Contains(out, "step.waiting") {
			t.Fatalf("run --watch: exit %d, stdout %q, stderr %q; want exit 3 at the wait", code, out, errOut)
		}
		id := strings.TrimSpace(strings.TrimPrefix(strings.SplitN(out, "\n", 2)[0], "run "))
		var r runs.Run
		okJSON(t, &r, "runs", "show", id, "--server", d.URL)
		if r.Status != runs.RunWaiting {
			t.Fatalf("run %s is %s, want waiting", id, r.Status)
		}
		return id
	}

	approved := start()
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("the shell command ran before approval: %v", err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"reject", approved}, 2, "--reason is required"},
		{[]string{"approve", approved, "--call", "nosuch"}, 1, "call_id"},
		{[]string{"approve", "run_nosuch"}, 4, "404"},
	} {
		code, _, errOut := rathctl(t, "", append(c.args, "--server", d.URL)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("rathctl %v: exit %d, stderr %q; want exit %d mentioning %q", c.args, code, errOut, c.code, c.want)
		}
	}
	code, out, errOut := rathctl(t, "", "approve", approved, "--call", "sh1", "--server", d.URL)
	if code != 0 || !strings.Contains(out, "approved") || !strings.Contains(out, "continues as step") {
		t.Fatalf("approve: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, out, errOut = rathctl(t, "", "approve", approved, "--server", d.URL); code != 1 || !strings.Contains(errOut, "409") {
		// The run may still be running its continuation or have ended;
		// either way nothing waits.
		t.Fatalf("second approve: exit %d, stdout %q, stderr %q; want a 409", code, out, errOut)
	}

	rejected := start()
	// reject --watch follows the run to its end: its story from the start
	// (the wait included), the continuation, and the final answer.
	code, out, errOut = rathctl(t, "", "reject", rejected, "--reason", "change freeze", "--watch", "--server", d.URL)
	if code != 0 || !strings.Contains(out, "rejected") || !strings.Contains(out, "step.waiting") ||
		!strings.Contains(out, "run.completed") || !strings.Contains(out, "answer: Done.") {
		t.Fatalf("reject --watch: exit %d, stdout %q, stderr %q; want the story to run.completed and the answer", code, out, errOut)
	}
	for _, id := range []string{approved, rejected} {
		testenv.Eventually(t, 30*time.Second, "run "+id+" to succeed", func() bool {
			var r runs.Run
			okJSON(t, &r, "runs", "show", id, "--server", d.URL)
			if r.Status.Terminal() && r.Status != runs.RunSucceeded {
				t.Fatalf("run %s ended %s: %s", id, r.Status, r.Error)
			}
			return r.Status == runs.RunSucceeded
		})
	}
	b, err := os.ReadFile(marker)
	if err != nil || strings.Count(string(b), "ran") != 1 {
		t.Fatalf("marker %q, %v: want exactly one execution (the approved run's)", b, err)
	}
}
