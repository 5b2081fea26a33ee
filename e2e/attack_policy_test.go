package e2e

// Attacks on the operator's sandbox policy (issue #19, findings 1 and 4):
// a tenant with an ordinary submit token tries to run its tools on the
// worker host, to move a session back to the host, and to pick the Docker
// network, image and entrypoint of its sandbox.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/session"
)

// attackLabel marks every Docker object these tests create, so a crashed
// run's leftovers can be found (docker ps -a --filter label=rath.e2e.attack).
const attackLabel = "rath.e2e.attack=policy"

// shellAgent writes a scripted agent whose one tool call runs cmd with
// run_shell_command, and returns its path.
func shellAgent(s *secured, name, cmd string) string {
	s.t.Helper()
	args, err := json.Marshal(map[string]string{"cmd": cmd})
	if err != nil {
		s.t.Fatal(err)
	}
	return s.writeFile(name+".yaml", fmt.Sprintf(`name: %s
model: scripted
tools: [builtin]
script:
  - content: "running it"
    tool_calls:
      - function: {name: run_shell_command, arguments: %s}
  - content: "done"
`, name, args))
}

// submitRun submits agent on a new session (or on version session when
// set) as token and returns the run, or the refusal's stderr.
func submitTo(s *secured, token, agent, session string) (runs.Run, string, bool) {
	s.t.Helper()
	args := []string{"run", "--agent", agent, "-o", "json"}
	if session != "" {
		args = append(args, "--session", session)
	} else {
		args = append(args, "--message", "go")
	}
	out, errOut, code := s.rathctl([]string{"RATH_TOKEN=" + token}, "", args...)
	if code != 0 {
		return runs.Run{}, errOut, false
	}
	var r runs.Run
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		s.t.Fatalf("run output %q: %v", out, err)
	}
	return r, "", true
}

// everything returns what a tenant can read back about a run: the run
// record and, when it committed one, its output's transcript.
func everything(ctx context.Context, s *secured, cl *client.Client, r runs.Run) string {
	s.t.Helper()
	all, err := json.Marshal(r)
	if err != nil {
		s.t.Fatal(err)
	}
	if r.Output != nil {
		var tr json.RawMessage
		if err := cl.Do(ctx, http.MethodGet, "/v1/sessions/"+r.Output.String()+"/transcript", nil, &tr); err != nil {
			s.t.Fatalf("transcript of %s: %v", r.Output, err)
		}
		all = append(all, tr...)
	}
	return string(all)
}

// wantRefused checks that err is the API's 400 naming field.
func wantRefused(t *testing.T, what string, err error, field string) {
	t.Helper()
	var ae *client.APIError
	switch {
	case err == nil:
		t.Errorf("%s: accepted; want a 400 naming %s", what, field)
	case !errors.As(err, &ae) || ae.Status != http.StatusBadRequest:
		t.Errorf("%s: %v; want a 400 naming %s", what, err, field)
	case !strings.Contains(ae.Message, field) || !strings.Contains(ae.Message, "sandbox policy"):
		t.Errorf("%s: %q; want the message to name %s and the sandbox policy", what, ae.Message, field)
	}
}

// TestAttackToolsOnWorkerHost: umbrella submits an agent whose tool reads
// the worker's environment and a file on the worker host, on a session it
// never placed, to a Postgres worker with the default configuration.
// Nothing of the host may come back: the tool runs in a container, or the
// run is refused.
func TestAttackToolsOnWorkerHost(t *testing.T) {
	t.Parallel()
	s := newSecured(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	hostSecret := "host-only-" + randHex(t)
	planted := s.writeFile("host-secret.txt", hostSecret+"\n")
	umbrella := s.mint("submit", "umbrella")
	cl, err := client.New(s.server, umbrella)
	if err != nil {
		t.Fatal(err)
	}
	agent := shellAgent(s, "snoop", "cat "+planted+"; tr '\\000' '\\n' < /proc/$PPID/environ")
	r, refusal, ok := submitTo(s, umbrella, agent, "")
	if !ok {
		if !strings.Contains(refusal, "sandbox policy") {
			t.Fatalf("submit refused, but not by the sandbox policy: %s", refusal)
		}
		return
	}
	r = s.waitRun(umbrella, r.ID)
	// What the API and the CLI show the tenant.
	got := everything(ctx, s, cl, r) + s.as(umbrella, "runs", "show", r.ID, "-o", "json")
	for _, leak := range []string{hostSecret, "RATH_NATS_", "RATH_STORE", secWorkerPW} {
		if strings.Contains(got, leak) {
			t.Errorf("umbrella's tool read the worker host: the run (%s) carries %q", r.Status, leak)
		}
	}
	switch {
	case r.Status == runs.RunFailed && !strings.Contains(r.Error, "sandbox policy"):
		t.Errorf("run failed, but not by the sandbox policy: %s", r.Error)
	case r.Status == runs.RunSucceeded && !strings.Contains(got, "HOME=/workspace"):
		// The default backend ran the tool: in a container, whose
		// environment it read instead of the worker's.
		t.Errorf("run succeeded, but the tool did not run in a docker sandbox: %s", got)
	}
}

// TestAttackPlacementBackToLocal: umbrella places its session on docker,
// then tries to move it back to the worker host through POST /v1/versions
// and through a session import. Both are refused naming the field, and a
// run on the session never reaches the host.
func TestAttackPlacementBackToLocal(t *testing.T) {
	t.Parallel()
	s := newSecured(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	umbrella := s.mint("submit", "umbrella")
	cl, err := client.New(s.server, umbrella)
	if err != nil {
		t.Fatal(err)
	}
	g := cl.Graph()
	base, err := session.FromUserMessage(ctx, g, "place me")
	if err != nil {
		t.Fatal(err)
	}
	onDocker, err := base.To(ctx, session.Placement{Backend: "docker"})
	if err != nil {
		t.Fatalf("placing on docker (allowed): %v", err)
	}
	back, backErr := onDocker.To(ctx, session.Placement{Backend: "local"})
	wantRefused(t, "POST /v1/versions moving the session to local", backErr, "placement.backend")

	// The same move, sealed locally and imported as session JSONL.
	mem := session.NewMemoryGraph()
	for _, v := range []*session.Version{base.Version(), onDocker.Version()} {
		if _, err := mem.Put(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	pre, err := session.Open(ctx, mem, onDocker.ID())
	if err != nil {
		t.Fatal(err)
	}
	moved, err := pre.To(ctx, session.Placement{Backend: "local"})
	if err != nil {
		t.Fatal(err)
	}
	var jsonl, out bytes.Buffer
	if err := session.Export(ctx, mem, moved.ID(), &jsonl); err != nil {
		t.Fatal(err)
	}
	ierr := cl.Stream(ctx, http.MethodPost, "/v1/sessions/import", &jsonl, "application/x-ndjson", &out)
	wantRefused(t, "importing a version placed on local", ierr, "placement.backend")

	// Had the move gone through, a run on it must still not reach the host.
	if backErr == nil {
		hostSecret := "host-only-" + randHex(t)
		planted := s.writeFile("host-secret.txt", hostSecret+"\n")
		r, _, ok := submitTo(s, umbrella, shellAgent(s, "snoop", "cat "+planted), back.ID().String())
		if ok {
			r = s.waitRun(umbrella, r.ID)
			if got := everything(ctx, s, cl, r); strings.Contains(got, hostSecret) {
				t.Errorf("a run on the session moved to local read the worker host")
			}
		}
	}
}

// TestAttackDockerNetworkImageEntrypoint: umbrella names a user-defined
// Docker network where another container serves a secret, a Docker image
// the operator did not allow, and an entrypoint. Each placement is refused
// naming its field; the default sandbox (no network) cannot reach the
// secret server either.
func TestAttackDockerNetworkImageEntrypoint(t *testing.T) {
	t.Parallel()
	s := newSecured(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	netName := "rath-attack-" + randHex(t)
	mustDocker(t, "network", "create", "--label", attackLabel, netName)
	t.Cleanup(func() { _, _ = exec.Command("docker", "network", "rm", netName).CombinedOutput() })
	secret := "container-secret-" + randHex(t)
	srv := mustDocker(t, "run", "-d", "--rm", "--label", attackLabel, "--network", netName, "rath-sandbox:busybox",
		"/bin/sh", "-c", "mkdir -p /tmp/www && echo "+secret+" > /tmp/www/s && exec httpd -f -p 8080 -h /tmp/www")
	t.Cleanup(func() { _, _ = exec.Command("docker", "rm", "-f", srv).CombinedOutput() })
	ip := mustDocker(t, "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", srv)

	umbrella := s.mint("submit", "umbrella")
	cl, err := client.New(s.server, umbrella)
	if err != nil {
		t.Fatal(err)
	}
	base, err := session.FromUserMessage(ctx, cl.Graph(), "reach the vault")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		field string
		spec  session.Spec
	}{
		{"placement.spec.network", session.Spec{Network: netName}},
		{"placement.spec.network", session.Spec{Network: "bridge"}},
		{"placement.spec.network", session.Spec{Network: "egress"}}, // the operator granted no egress network
		{"placement.spec.image", session.Spec{Image: "rath-sandbox:not-allowed"}},
		{"placement.spec.entrypoint", session.Spec{Entrypoint: []string{"/bin/sh", "-c", fetchSecret(ip) + " > /workspace/loot; sleep 3600"}}},
	} {
		placed, err := base.To(ctx, session.Placement{Backend: "docker", Spec: c.spec})
		wantRefused(t, fmt.Sprintf("placing on docker with %+v", c.spec), err, c.field)
		if err == nil && c.spec.Network == netName {
			// Today's hole, shown: the sandbox joins the network and reads
			// the other container's secret.
			r, _, ok := submitTo(s, umbrella, shellAgent(s, "reach", fetchSecret(ip)), placed.ID().String())
			if ok {
				r = s.waitRun(umbrella, r.ID)
				if strings.Contains(everything(ctx, s, cl, r), secret) {
					t.Errorf("a sandbox on the tenant-named network %s read the other container's secret", netName)
				}
			}
		}
	}

	// The operator's default sandbox: no network at all, so the server's
	// address is unreachable.
	onDocker, err := base.To(ctx, session.Placement{Backend: "docker"})
	if err != nil {
		t.Fatalf("placing on docker (allowed): %v", err)
	}
	r, refusal, ok := submitTo(s, umbrella, shellAgent(s, "reach", fetchSecret(ip)+"; echo exit=$?"), onDocker.ID().String())
	if !ok {
		t.Fatalf("submit on the docker session: %s", refusal)
	}
	r = s.waitRun(umbrella, r.ID)
	got := everything(ctx, s, cl, r)
	if strings.Contains(got, secret) {
		t.Errorf("the default docker sandbox reached %s on a user-defined network", ip)
	}
	if r.Status != runs.RunSucceeded || !strings.Contains(got, "exit=") {
		t.Errorf("the default docker sandbox run: %s %s; want it to run the command (and fail to connect)", r.Status, r.Error)
	}
}

// fetchSecret is a shell command that GETs the secret server's /s at ip
// (busybox's nc: the static busybox's wget and name lookups crash).
func fetchSecret(ip string) string {
	return "printf 'GET /s HTTP/1.0\\r\\n\\r\\n' | nc -w 5 " + ip + " 8080"
}

// mustDocker runs the docker CLI (dockerCLI) and returns its trimmed
// stdout; it fails the test when the command fails.
func mustDocker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := dockerCLI(context.Background(), args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func randHex(t *testing.T) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}
