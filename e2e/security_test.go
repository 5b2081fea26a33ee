package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/natsauth"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/internal/testenv"
)

// secured is a deployment as separate processes with every guard on: the
// coordinator requires tokens (bootstrap RATH_TOKEN) and confines tenants;
// NATS accepts only the coordinator and worker users, with their
// permissions; the worker's database connections act as rath_worker and
// its NATS password comes from a file.
type secured struct {
	t        *testing.T
	dir      string
	server   string
	natsURL  string
	storeURL string // the owner's URL: the attack tests' view of the truth
	procs    []*proc
	worker   *proc
}

// secOptions varies a secured deployment for one attack: extra environment
// and flags for the coordinator and the worker (appended after the
// defaults, so a flag given here wins), and workers beyond the first.
type secOptions struct {
	CoordEnv, CoordArgs   []string
	WorkerEnv, WorkerArgs []string
	// WorkerSuperuser runs the worker with the owner's database URL
	// instead of the rath_worker role (what compose used to ship).
	WorkerSuperuser bool
}

const (
	secBootstrap = "e2e-bootstrap-token-0123456789"
	secCoordPW   = "e2e-coordinator-nats-pw"
	secWorkerPW  = "e2e-worker-nats-pw"
)

func newSecured(t *testing.T, opts ...secOptions) *secured {
	t.Helper()
	var o secOptions
	for _, x := range opts {
		o.CoordEnv = append(o.CoordEnv, x.CoordEnv...)
		o.CoordArgs = append(o.CoordArgs, x.CoordArgs...)
		o.WorkerEnv = append(o.WorkerEnv, x.WorkerEnv...)
		o.WorkerArgs = append(o.WorkerArgs, x.WorkerArgs...)
		o.WorkerSuperuser = o.WorkerSuperuser || x.WorkerSuperuser
	}
	storeURL := testdb.Postgres(t)
	dir := t.TempDir()
	s := &secured{t: t, dir: dir, storeURL: storeURL}
	add := func(name string, env []string, args ...string) *proc {
		p := &proc{name: name, args: args, env: env, log: filepath.Join(dir, fmt.Sprintf("%s-%d.log", name, len(s.procs)))}
		s.procs = append(s.procs, p)
		return p
	}
	t.Cleanup(func() {
		for _, p := range s.procs {
			p.kill(t)
		}
		if t.Failed() {
			for _, p := range s.procs {
				t.Logf("--- %s output:\n%s", p.name, tail(p.output(), 4000))
			}
		}
	})

	natsPort := freePort(t)
	s.natsURL = fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
	natsd := add("natsd", []string{"RATH_NATSD_USERS=coordinator:coordinator:" + secCoordPW + ",worker:worker:" + secWorkerPW},
		"-port", strconv.Itoa(natsPort), "-store", filepath.Join(dir, "jetstream"))
	natsd.start(t)
	testenv.Eventually(t, 30*time.Second, "natsd ready", func() bool { return strings.Contains(natsd.output(), "ready") })

	httpPort := freePort(t)
	s.server = fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	coord := add("coordinator", append([]string{"RATH_TOKEN=" + secBootstrap, "RATH_NATS_USER=coordinator", "RATH_NATS_PASSWORD=" + secCoordPW}, o.CoordEnv...),
		append([]string{"--store", storeURL, "--nats", s.natsURL, "--addr", fmt.Sprintf("127.0.0.1:%d", httpPort)}, o.CoordArgs...)...)
	coord.start(t)
	testenv.Eventually(t, 60*time.Second, "coordinator ready", func() bool {
		res, err := http.Get(s.server + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})

	// The worker: rath_worker in the database, the worker user on NATS.
	u, err := url.Parse(storeURL)
	if err != nil {
		t.Fatal(err)
	}
	if !o.WorkerSuperuser {
		q := u.Query()
		q.Set("role", "rath_worker")
		u.RawQuery = q.Encode()
	}
	pwFile := filepath.Join(dir, "nats-password")
	if err := os.WriteFile(pwFile, []byte(secWorkerPW+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.worker = add("worker", append([]string{"RATH_NATS_USER=worker", "RATH_NATS_PASSWORD_FILE=" + pwFile}, o.WorkerEnv...),
		append([]string{"--store", u.String(), "--nats", s.natsURL, "--name", "restricted", "--health", "", "--slots", "1"}, o.WorkerArgs...)...)
	s.worker.start(t)
	return s
}

// rathctl runs the built rathctl with env (RATH_SERVER and a private
// RATH_HOME are set) and stdin; it returns stdout, stderr and the exit code.
func (s *secured) rathctl(env []string, stdin string, args ...string) (string, string, int) {
	s.t.Helper()
	cmd := exec.Command(bin(s.t, "rathctl"), args...)
	cmd.Env = append(os.Environ(), "RATH_SERVER="+s.server, "RATH_HOME="+filepath.Join(s.dir, "home"), "RATH_TOKEN=", "RATH_STORE=")
	cmd.Env = append(cmd.Env, env...)
	cmd.Dir = s.dir
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		s.t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

func (s *secured) mint(scope, tenant string) string {
	s.t.Helper()
	out, errOut, code := s.rathctl([]string{"RATH_TOKEN=" + secBootstrap}, "", "token", "create", "--scope", scope, "--tenant", tenant, "--name", scope+"@"+tenant)
	if code != 0 {
		s.t.Fatalf("token create %s@%s: exit %d: %s", scope, tenant, code, errOut)
	}
	return strings.TrimSpace(out)
}

// TestSecuredCluster runs a deployment with every guard on and attacks it
// from outside: no token, a read token submitting, another tenant reading
// a run and its session, a worker's NATS credentials administering the
// streams. The legitimate path still works end to end, through a worker
// held to its database and NATS roles, and no process logs a secret.
func TestSecuredCluster(t *testing.T) {
	t.Parallel()
	s := newSecured(t)
	agent := filepath.Join(s.dir, "agent.yaml")
	if err := os.WriteFile(agent, []byte("name: echo\nmodel: scripted\nscript:\n  - content: done under guard\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// No token: 401.
	if _, errOut, code := s.rathctl(nil, "", "runs", "list"); code == 0 || !strings.Contains(errOut, "401") {
		t.Fatalf("runs list without a token: exit %d: %s", code, errOut)
	}
	read := s.mint("read", "acme")
	submit := s.mint("submit", "acme")
	other := s.mint("submit", "umbrella")

	// A read token cannot submit.
	if _, errOut, code := s.rathctl([]string{"RATH_TOKEN=" + read}, "", "run", "--agent", agent, "--message", "hi"); code == 0 || !strings.Contains(errOut, "403") {
		t.Fatalf("read token submitting: exit %d: %s", code, errOut)
	}
	// Acme's run goes through the restricted worker.
	out, errOut, code := s.rathctl([]string{"RATH_TOKEN=" + submit}, "", "run", "--agent", agent, "--message", "acme's secret question", "-o", "json")
	if code != 0 {
		t.Fatalf("submit: exit %d: %s", code, errOut)
	}
	var r runs.Run
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("run output %q: %v", out, err)
	}
	testenv.Eventually(t, 60*time.Second, "acme's run succeeds", func() bool {
		out, _, code := s.rathctl([]string{"RATH_TOKEN=" + read}, "", "runs", "show", r.ID, "-o", "json")
		return code == 0 && json.Unmarshal([]byte(out), &r) == nil && r.Status == runs.RunSucceeded
	})
	if r.Output == nil || r.Steps[0].Worker != "restricted" {
		t.Fatalf("run %+v: want an output committed by the restricted worker", r)
	}
	// Umbrella, by id: not found.
	for _, args := range [][]string{
		{"runs", "show", r.ID},
		{"session", "show", r.Output.String(), "--server", s.server},
		{"runs", "cancel", r.ID},
	} {
		out, errOut, code := s.rathctl([]string{"RATH_TOKEN=" + other}, "", args...)
		if code == 0 || !strings.Contains(errOut, "404") || strings.Contains(out+errOut, "secret question") {
			t.Errorf("umbrella %v: exit %d: %s %s", args, code, out, errOut)
		}
	}
	// Login stores the token; rathctl then needs no RATH_TOKEN.
	if _, errOut, code := s.rathctl(nil, read+"\n", "login"); code != 0 {
		t.Fatalf("login: exit %d: %s", code, errOut)
	}
	if out, errOut, code := s.rathctl(nil, "", "runs", "list", "-o", "json"); code != 0 || !strings.Contains(out, r.ID) {
		t.Fatalf("runs list after login: exit %d: %s %s", code, out, errOut)
	}

	// The worker's NATS credentials cannot delete or purge the job stream.
	nc, err := nats.Connect(s.natsURL, nats.UserInfo("worker", secWorkerPW), nats.CustomInboxPrefix(natsauth.WorkerInboxPrefix))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	if err := js.DeleteStream(ctx, bus.JobsStream); err == nil {
		t.Error("the worker's NATS user deleted the job stream")
	}
	cancel()
	cn, err := nats.Connect(s.natsURL, nats.UserInfo("coordinator", secCoordPW))
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close()
	cjs, err := jetstream.New(cn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cjs.Stream(ctx, bus.JobsStream); err != nil {
		t.Errorf("job stream after the worker's attempt: %v", err)
	}
	if _, err := nats.Connect(s.natsURL, nats.MaxReconnects(0)); err == nil {
		t.Error("NATS accepted a connection without credentials")
	}

	// No process logged a secret.
	for _, p := range s.procs {
		log := p.output()
		for _, secret := range []string{secBootstrap, secCoordPW, secWorkerPW, read, submit, other} {
			if strings.Contains(log, secret) {
				t.Errorf("%s's output contains a secret", p.name)
			}
		}
	}
}

// writeFile writes a file under the deployment's directory and returns its path.
func (s *secured) writeFile(name, content string) string {
	s.t.Helper()
	p := filepath.Join(s.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		s.t.Fatal(err)
	}
	return p
}

// as runs rathctl with token; it fails the test on a non-zero exit unless
// the caller checks the code itself (use s.rathctl for that).
func (s *secured) as(token string, args ...string) string {
	s.t.Helper()
	out, errOut, code := s.rathctl([]string{"RATH_TOKEN=" + token}, "", args...)
	if code != 0 {
		s.t.Fatalf("rathctl %v: exit %d: %s", args, code, errOut)
	}
	return out
}

// waitRun waits for run id to end (any terminal status) as seen by token,
// and returns it.
func (s *secured) waitRun(token, id string) runs.Run {
	s.t.Helper()
	var r runs.Run
	testenv.Eventually(s.t, 90*time.Second, "run "+id+" ends", func() bool {
		out, _, code := s.rathctl([]string{"RATH_TOKEN=" + token}, "", "runs", "show", id, "-o", "json")
		return code == 0 && json.Unmarshal([]byte(out), &r) == nil && r.Status.Terminal()
	})
	return r
}
