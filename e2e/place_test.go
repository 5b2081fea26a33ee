package e2e

// Placement from the CLI (issue #20, item 5): the same agent on local and
// on docker is one flag of rathctl run.

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/runs"
)

// TestRunSandboxFlag runs one scripted agent whose run_shell_command tool
// prints $HOME and the hostname, through rathctl run --sandbox local and
// --sandbox docker:rath-sandbox:busybox, on a coordinator+worker with an
// operator policy allowing both. On docker the tool runs in a container
// (HOME is /workspace, the hostname is the container's); on local it runs on
// the worker host. An image outside the policy and an unknown backend are
// refused at submit (another tenant's 404 on …/place: TestTenantIsolation).
func TestRunSandboxFlag(t *testing.T) {
	t.Parallel()
	s := newSecured(t, allowLocal(t))
	acme := s.mint("submit", "acme")
	agent := shellAgent(s, "where", `echo "RAN-AT-$HOME-ON-$(cat /etc/hostname)"`)
	ran := func(sandbox string) string {
		t.Helper()
		out, errOut, code := s.rathctl([]string{"RATH_TOKEN=" + acme}, "", "run", "--agent", agent, "--message", "where am I?",
			"--sandbox", sandbox, "-o", "json")
		if code != 0 {
			t.Fatalf("rathctl run --sandbox %s: exit %d: %s\n%s", sandbox, code, errOut, out)
		}
		var r runs.Run
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("run output %q: %v", out, err)
		}
		if r = s.waitRun(acme, r.ID); r.Status != runs.RunSucceeded || r.Output == nil {
			t.Fatalf("--sandbox %s: run %s (%s), want succeeded", sandbox, r.Status, r.Error)
		}
		return s.as(acme, "session", "show", r.Output.String())
	}
	local := ran("local")
	onDocker := ran("docker:rath-sandbox:busybox")
	// The tool's output (the call's arguments say $HOME, the result a path).
	atLocal, atDocker := line(local, "RAN-AT-/"), line(onDocker, "RAN-AT-/")
	if !strings.Contains(atDocker, "RAN-AT-/workspace-ON-") {
		t.Errorf("--sandbox docker: the tool did not run in a docker sandbox (HOME is not /workspace): %q\n%s", atDocker, tail(onDocker, 3000))
	}
	if atLocal == "" || strings.Contains(atLocal, "RAN-AT-/workspace-") {
		t.Errorf("--sandbox local: the tool did not run on the worker host: %q\n%s", atLocal, tail(local, 3000))
	}
	if hostOf := func(l string) string { _, h, _ := strings.Cut(l, "-ON-"); return h }; hostOf(atLocal) == hostOf(atDocker) {
		t.Errorf("the same hostname on local and docker: %q, %q", atLocal, atDocker)
	}
	t.Logf("local:  %s", atLocal)
	t.Logf("docker: %s", atDocker)

	// Outside the operator's policy: refused at submit, naming the field.
	_, errOut, code := s.rathctl([]string{"RATH_TOKEN=" + acme}, "", "run", "--agent", agent, "--message", "x",
		"--sandbox", "docker:alpine:latest", "-o", "json")
	if code == 0 || !strings.Contains(errOut, "placement.spec.image") || !strings.Contains(errOut, "sandbox policy") {
		t.Errorf("--sandbox docker:alpine:latest: exit %d, %q; want a refusal naming placement.spec.image", code, errOut)
	}
	_, errOut, code = s.rathctl([]string{"RATH_TOKEN=" + acme}, "", "run", "--agent", agent, "--message", "x", "--sandbox", "vm")
	if code != 2 || !strings.Contains(errOut, "--sandbox") {
		t.Errorf("--sandbox vm: exit %d, %q; want exit 2 naming --sandbox", code, errOut)
	}
}

// line returns the first line of s containing sub.
func line(s, sub string) string {
	for l := range strings.Lines(s) {
		if strings.Contains(l, sub) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}
