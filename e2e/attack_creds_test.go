package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/sandbox/docker"
	"github.com/rath-run/rath/pkg/session"
)

// Attacks on the worker's own credentials and disk (issue #19, findings 1
// and 9): a tenant with an ordinary submit token runs scripted tools that
// try to read the worker's secrets from /proc and the environment, and to
// fill the worker's disk.

// workerSecrets are the secrets an operator hands a worker the usual way:
// in its environment and on its command line. Each is random per test, so
// finding one in a transcript can only mean it leaked from this worker.
type workerSecrets struct {
	apiKey   string // OPENAI_API_KEY
	envPW    string // the password in RATH_STORE
	flagPW   string // the password in --store
	opts     secOptions
	patterns []string // what must never show up
}

func newWorkerSecrets(t *testing.T, extraEnv ...string) workerSecrets {
	t.Helper()
	rnd := func(prefix string) string {
		var b [12]byte
		_, _ = rand.Read(b[:])
		return prefix + hex.EncodeToString(b[:])
	}
	ws := workerSecrets{apiKey: rnd("sk-test-"), envPW: rnd("pwenv"), flagPW: rnd("pwflag")}
	withPW := func(pw string) string {
		// The test server trusts loopback: the password is carried, never checked.
		return testdb.WithParams(t, os.Getenv("RATH_TEST_DATABASE_URL"), "role", "rath_worker", "password", pw)
	}
	ws.opts = allowLocal(t)
	ws.opts.WorkerEnv = append(ws.opts.WorkerEnv, []string{
		"OPENAI_API_KEY=" + ws.apiKey,
		"RATH_STORE=" + withPW(ws.envPW),
		// The NATS password in the environment, not from a file.
		"RATH_NATS_PASSWORD_FILE=", "RATH_NATS_PASSWORD=" + secWorkerPW,
	}...)
	ws.opts.WorkerEnv = append(ws.opts.WorkerEnv, extraEnv...)
	ws.patterns = []string{ws.apiKey, ws.envPW, ws.flagPW}
	if os.Geteuid() == 0 {
		// The NATS password is also in natsd's environment (the test's
		// NATS server, a process of the same user): only tools running as
		// another user, as a root worker's do, cannot read it there.
		ws.patterns = append(ws.patterns, secWorkerPW)
	}
	return ws
}

// storeFlag is the worker's --store with a password: the database newSecured
// made, as rath_worker. It must be added after newSecured picked the
// database, so the attack tests restart the worker with it.
func (ws workerSecrets) storeFlag(t *testing.T, s *secured) []string {
	t.Helper()
	return []string{"--store", testdb.WithParams(t, s.storeURL, "role", "rath_worker", "password", ws.flagPW)}
}

// withWorker replaces the deployment's worker by one started with extra
// arguments (the --store with a password), keeping its environment.
func (s *secured) withWorker(t *testing.T, extraArgs ...string) {
	t.Helper()
	s.worker.kill(t)
	w := &proc{name: "worker", args: append(append([]string(nil), s.worker.args...), extraArgs...), env: s.worker.env, log: s.worker.log}
	s.procs = append(s.procs, w)
	s.worker = w
	w.start(t)
}

// shellSpec is a scripted agent that runs cmd with run_shell_command, then
// ends.
func shellSpec(t *testing.T, cmd string) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"name": "attacker", "model": "scripted", "tools": []string{"builtin"},
		"script": []any{
			map[string]any{"tool_calls": []any{map[string]any{"function": map[string]any{
				"name": "run_shell_command", "arguments": map[string]any{"cmd": cmd},
			}}}},
			map[string]any{"content": "done"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// runTool submits spec as token over a new session (placed on backend
// unless that is ""), waits for the run and returns it with its output's
// transcript as the tenant sees it.
func (s *secured) runTool(t *testing.T, token, backend string, spec json.RawMessage) (runs.Run, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := client.New(s.server, token)
	if err != nil {
		t.Fatal(err)
	}
	in, err := session.FromUserMessage(ctx, cl.Graph(), "go")
	if err != nil {
		t.Fatalf("new session: %v", err)
	}
	if backend != "" {
		if in, err = in.To(ctx, session.Placement{Backend: backend}); err != nil {
			t.Fatalf("place on %s: %v", backend, err)
		}
	}
	var r runs.Run
	if err := cl.Do(ctx, "POST", "/v1/runs", map[string]any{"agent": spec, "session": in.Version().ID.String()}, &r); err != nil {
		t.Fatalf("submit: %v", err)
	}
	r = s.waitRun(token, r.ID)
	if r.Status != runs.RunSucceeded || r.Output == nil {
		t.Fatalf("run %s ended %s (%s)", r.ID, r.Status, r.Error)
	}
	var tr json.RawMessage
	if err := cl.Do(ctx, "GET", "/v1/sessions/"+r.Output.String()+"/transcript", nil, &tr); err != nil {
		t.Fatalf("transcript: %v", err)
	}
	return r, string(tr)
}

// stealCmd is what a tool tries: the worker's environment (its parent's on
// local), every process's environment and command line, its own
// environment, and the worker's open files.
const stealCmd = `echo attack-ran; id; cat /proc/$PPID/environ | tr '\0' '\n'; ` +
	`grep -a -h -o -E '(sk-test-|pwenv|pwflag|e2e-worker-nats-p[w]|RATH_NATS_PASSWORD=|RATH_STORE=|OPENAI_API_KEY=)[^[:cntrl:] ]*' /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | sort -u | head -200; ` +
	`env; ls -l /proc/$PPID/fd 2>&1 | head -50; echo attack-end`

func TestAttackCredsLocalEnviron(t *testing.T) {
	t.Parallel()
	ws := newWorkerSecrets(t)
	s := newSecured(t, ws.opts)
	s.withWorker(t, ws.storeFlag(t, s)...)
	attacker := s.mint("submit", "umbrella")

	_, tr := s.runTool(t, attacker, "", shellSpec(t, stealCmd))
	if !strings.Contains(tr, "attack-ran") || !strings.Contains(tr, "attack-end") {
		t.Fatalf("the attack's tool did not run to its end:\n%s", tail(tr, 2000))
	}
	for _, secret := range ws.patterns {
		if strings.Contains(tr, secret) {
			t.Errorf("a local tool read the worker's secret %q:\n%s", secret[:8]+"…", tail(tr, 3000))
		}
	}
	for _, p := range s.procs {
		for _, secret := range ws.patterns {
			if strings.Contains(p.output(), secret) {
				t.Errorf("%s logged the secret %q", p.name, secret[:8]+"…")
			}
		}
	}
}

func TestAttackCredsDockerEnviron(t *testing.T) {
	t.Parallel()
	testenv.RequireDocker(t, docker.DefaultImage)
	ws := newWorkerSecrets(t)
	s := newSecured(t, ws.opts)
	s.withWorker(t, ws.storeFlag(t, s)...)
	attacker := s.mint("submit", "umbrella")

	cmd := stealCmd + `; cat /proc/1/environ | tr '\0' '\n'`
	_, tr := s.runTool(t, attacker, docker.Name, shellSpec(t, cmd))
	if !strings.Contains(tr, "attack-ran") || !strings.Contains(tr, "attack-end") {
		t.Fatalf("the attack's tool did not run to its end:\n%s", tail(tr, 2000))
	}
	for _, secret := range ws.patterns {
		if strings.Contains(tr, secret) {
			t.Errorf("a docker tool read the worker's secret %q:\n%s", secret[:8]+"…", tail(tr, 3000))
		}
	}
}

// fillCmd writes 48 MiB into a workspace whose quota is 32 MiB, reports
// dd's status, and removes the file (so the step's snapshot stays within
// the limits and the transcript is committed either way).
const fillCmd = `dd if=/dev/zero of=big bs=1M count=48 2>&1; echo "dd-exit=$?"; ls -l big; rm -f big; echo fill-end`

func TestAttackCredsDiskQuota(t *testing.T) {
	t.Parallel()
	testenv.RequireDocker(t, docker.DefaultImage)
	s := newSecured(t, allowLocal(t), secOptions{WorkerEnv: []string{"RATH_WORKSPACE_MAX_BYTES=" + "33554432"}})
	attacker := s.mint("submit", "umbrella")
	victim := s.mint("submit", "acme")

	for _, backend := range []string{docker.Name, ""} {
		_, tr := s.runTool(t, attacker, backend, shellSpec(t, fillCmd))
		if !strings.Contains(tr, "fill-end") {
			t.Fatalf("%q: the fill did not run to its end:\n%s", backend, tail(tr, 2000))
		}
		if strings.Contains(tr, "dd-exit=0") || !strings.Contains(tr, "No space left on device") {
			t.Errorf("%q: a tool wrote 48 MiB into a workspace with a 32 MiB quota:\n%s", backend, tail(tr, 2000))
		}
		// Another tenant's step on the same worker runs normally.
		_, vt := s.runTool(t, victim, backend, shellSpec(t, `dd if=/dev/zero of=small bs=1M count=4 2>&1; echo "dd-exit=$?"`))
		if !strings.Contains(vt, "dd-exit=0") {
			t.Errorf("%q: the victim's step after the fill failed to write 4 MiB:\n%s", backend, tail(vt, 2000))
		}
	}
}

// allowLocal is the operator's choice these attacks need: a sandbox policy
// that lets tenants' tools run on "local" (unplaced sessions go there) as
// well as docker, given to the coordinator and the worker. Without it a
// worker on Postgres runs tools only in docker (TestAttackToolsOnWorkerHost).
func allowLocal(t *testing.T) secOptions {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sandbox-policy.yaml")
	pol := "backends: [local, docker]\ndefault: local\ndocker:\n  images: [" + docker.DefaultImage + "]\n"
	if err := os.WriteFile(p, []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"RATH_SANDBOX_POLICY=" + p}
	return secOptions{CoordEnv: env, WorkerEnv: env}
}
