package e2e

// Placement from the CLI (issue #20, item 5): the same agent on local and
// on docker is one flag of rathctl run.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/session"
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

// placedWorkflow is a workflow file of two shell agents: host has no
// sandbox block (it runs where its input is placed: an unplaced session,
// on the policy's default, local), boxed asks for docker with image.
func placedWorkflow(image string) string {
	// The scripted model answers by the number of assistant messages so
	// far: boxed, second, skips host's two.
	shell := func(marker string, skip int) string {
		args, _ := json.Marshal(map[string]string{"cmd": `echo "` + marker + `-AT-$HOME-ON-$(cat /etc/hostname)"`})
		return fmt.Sprintf(`    model: scripted
    tools: [builtin]
    script:
`+strings.Repeat("      - content: \"(host's turn)\"\n", skip)+`      - content: "running it"
        tool_calls:
          - function: {name: run_shell_command, arguments: %s}
      - content: "done"
`, args)
	}
	return "name: placed\nagents:\n  host:\n" + shell("HOST", 0) + "  boxed:\n" + shell("BOXED", 2) +
		"    sandbox:\n      backend: docker\n      image: " + image + "\n" +
		"steps:\n  - agent: host\n  - agent: boxed\n"
}

// TestWorkflowSandboxPerAgent runs a workflow file through rathctl run on a
// coordinator+worker whose operator policy allows local and docker: agent
// boxed (sandbox: {backend: docker, image: rath-sandbox:busybox}) runs its
// tool in a container (HOME is /workspace, the container's hostname),
// agent host (no block) on the worker host. Boxed's step input is a
// version with op place on docker, child of host's output. The same file
// naming an image outside the policy is refused at submit, naming the
// field and the image's line in the user's file, and runs nothing.
func TestWorkflowSandboxPerAgent(t *testing.T) {
	t.Parallel()
	s := newSecured(t, allowLocal(t))
	acme := s.mint("submit", "acme")
	wf := s.writeFile("placed.yaml", placedWorkflow("rath-sandbox:busybox"))
	out, errOut, code := s.rathctl([]string{"RATH_TOKEN=" + acme}, "", "run", wf, "--message", "where am I?", "-o", "json")
	if code != 0 {
		t.Fatalf("rathctl run placed.yaml: exit %d: %s\n%s", code, errOut, out)
	}
	var r runs.Run
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("run output %q: %v", out, err)
	}
	if r = s.waitRun(acme, r.ID); r.Status != runs.RunSucceeded || r.Output == nil {
		t.Fatalf("workflow run %s (%s), want succeeded", r.Status, r.Error)
	}
	show := s.as(acme, "session", "show", r.Output.String())
	host, boxed := line(show, "HOST-AT-/"), line(show, "BOXED-AT-/")
	if !strings.Contains(boxed, "BOXED-AT-/workspace-ON-") {
		t.Errorf("agent boxed did not run its tool in a docker sandbox (HOME is not /workspace): %q\n%s", boxed, tail(show, 3000))
	}
	if host == "" || strings.Contains(host, "HOST-AT-/workspace-") {
		t.Errorf("agent host did not run its tool on the worker host: %q\n%s", host, tail(show, 3000))
	}
	if hostOf := func(l string) string { _, h, _ := strings.Cut(l, "-ON-"); return h }; hostOf(host) == hostOf(boxed) {
		t.Errorf("the same hostname for both agents: %q, %q", host, boxed)
	}
	t.Logf("host:  %s", host)
	t.Logf("boxed: %s", boxed)

	// The lineage: host's step forwards the unplaced input; boxed's step
	// forwards a version with op place on docker whose parent is host's
	// output.
	get := func(path string, v any) {
		t.Helper()
		res, err := s.api(context.Background(), acme, http.MethodGet, path, "")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, res.StatusCode)
		}
		if err := json.NewDecoder(res.Body).Decode(v); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	var full runs.Run
	get("/v1/runs/"+r.ID, &full)
	if len(full.Steps) != 2 || full.Steps[0].Output == nil {
		t.Fatalf("run steps %+v, want 2", full.Steps)
	}
	var in0, in1 session.Version
	get("/v1/versions/"+full.Steps[0].Input.String(), &in0)
	get("/v1/versions/"+full.Steps[1].Input.String(), &in1)
	if in0.Placement.Backend != "" || in0.Op == session.OpPlace {
		t.Errorf("host's step input %s is %s on %q, want the unplaced message", in0.ID, in0.Op, in0.Placement.Backend)
	}
	if in1.Op != session.OpPlace || in1.Placement.Backend != "docker" || in1.Placement.Spec.Image != "rath-sandbox:busybox" ||
		len(in1.Parents) != 1 || in1.Parents[0] != *full.Steps[0].Output {
		t.Errorf("boxed's step input = %s %s on %+v (parents %v), want op place on docker rath-sandbox:busybox after host's output %s",
			in1.ID, in1.Op, in1.Placement, in1.Parents, *full.Steps[0].Output)
	}

	// An image outside the operator's policy: refused at submit, naming
	// the field at its line of the user's file, exit 2.
	badFile := placedWorkflow("alpine:latest")
	bad := s.writeFile("bad.yaml", badFile)
	before, _, found := strings.Cut(badFile, "image: alpine")
	if !found {
		t.Fatal("the bad file has no image line")
	}
	wantLine := 1 + strings.Count(before, "\n")
	out, errOut, code = s.rathctl([]string{"RATH_TOKEN=" + acme}, "", "run", bad, "--message", "x", "-o", "json")
	want := fmt.Sprintf("%s:%d:7: agents.boxed.sandbox.image: \"alpine:latest\" is not allowed by the operator's sandbox policy", bad, wantLine)
	if code != 2 || !strings.Contains(errOut, want) {
		t.Errorf("rathctl run bad.yaml: exit %d, %q %q; want a refusal containing %q", code, errOut, out, want)
	}
	t.Logf("refused: %s", strings.TrimSpace(errOut))
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
