package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/store/storeurl"
)

// binaries are built once per test binary, on first use.
var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// bin returns the path of a built binary: coordinator, worker, rathctl,
// natsd or mcpserver (the MCP server of package tool/mcp's tests). The first call builds them all (without -race: the processes are
// the system under test, the race detector runs on the in-process tests).
func bin(t *testing.T, name string) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "rath-e2e-bin-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", binDir+"/",
			"./cmd/coordinator", "./cmd/worker", "./cmd/rathctl", "./e2e/natsd",
			"./pkg/tool/mcp/testdata/mcpserver")
		cmd.Dir = ".."
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out.String())
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, name)
}

// proc is one running process of the system.
type proc struct {
	name string
	// label names the process among its kind (a worker's --name).
	label string
	args  []string
	env   []string
	log   string
	// dir is the working directory ("": the test's).
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// freePort returns a port on 127.0.0.1 that nothing listens on now, for a
// child process to listen on. It is taken below the kernel's ephemeral
// range (ip_local_port_range), which the kernel never hands out on its own:
// a port from that range, closed and handed to a child, can be taken in
// between as the source port of any new connection on the machine (the
// examples' clusters failed so once in CI, "bind: address already in
// use"). Only another explicit bind can take this one first.
func freePort(t *testing.T) int {
	t.Helper()
	lo := ephemeralLow()
	for range 200 {
		p := 10000 + rand.IntN(lo-10000)
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue // taken
		}
		ln.Close()
		return p
	}
	t.Fatalf("no free port in 10000–%d after 200 tries", lo-1)
	return 0
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768,
// Linux's default, when it cannot be read or leaves too little below it).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo < 15000 {
		return 32768
	}
	return lo
}

// start starts the process; its stderr and stdout go to p.log (appended, so
// a restart keeps the earlier output).
func (p *proc) start(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(bin(t, p.name), p.args...)
	p.cmd.Env = append(os.Environ(), p.env...)
	p.cmd.Dir = p.dir
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", p.name, err)
	}
	p.done = make(chan struct{})
	go func() {
		p.err = p.cmd.Wait()
		f.Close()
		close(p.done)
	}()
}

func (p *proc) running() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM and waits up to 30s for a clean exit.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		t.Errorf("%s did not stop within 30s of SIGTERM", p.name)
	}
}

func (p *proc) output() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// cluster is a Rath deployment as separate processes: a NATS server with
// JetStream, a coordinator, workers, and a Postgres database of its own.
type cluster struct {
	t        *testing.T
	dir      string
	storeURL string
	natsURL  string
	server   string
	nats     *proc
	coord    *proc
	workers  []*proc
	procs    []*proc
	// token, when set, is the coordinator's bootstrap admin token (auth
	// on), which rathctl sends.
	token string
	// ctlEnv is added to rathctl's environment.
	ctlEnv []string
}

type clusterConfig struct {
	workers int
	// workerArgs are extra worker flags.
	workerArgs []string
	// coordArgs are extra coordinator flags.
	coordArgs []string
	// env is added to every Rath process's environment.
	env []string
	// token, when set, turns the coordinator's auth on with this bootstrap
	// admin token (RATH_TOKEN); rathctl sends it.
	token string
	// storeURL, when set, is the database to use instead of a fresh one on
	// the test cluster.
	storeURL string
	// ctlEnv is added to rathctl's environment (the coordinator and
	// workers get env).
	ctlEnv []string
}

func newCluster(t *testing.T, cfg clusterConfig) *cluster {
	t.Helper()
	storeURL := cfg.storeURL
	if storeURL == "" {
		storeURL = testdb.Postgres(t)
	}
	dir := t.TempDir()
	c := &cluster{t: t, dir: dir, storeURL: storeURL, token: cfg.token, ctlEnv: cfg.ctlEnv}
	natsPort := freePort(t)
	c.natsURL = fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
	c.nats = c.add("natsd", "-port", strconv.Itoa(natsPort), "-store", filepath.Join(dir, "jetstream"))
	httpPort := freePort(t)
	c.server = fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	c.coord = c.add("coordinator", append([]string{"--store", storeURL, "--nats", c.natsURL, "--addr", fmt.Sprintf("127.0.0.1:%d", httpPort)}, cfg.coordArgs...)...)
	c.coord.env = cfg.env
	if cfg.token != "" {
		c.coord.env = append(slices.Clone(cfg.env), "RATH_TOKEN="+cfg.token)
	}
	for i := range cfg.workers {
		args := append([]string{
			"--store", storeURL, "--nats", c.natsURL, "--name", fmt.Sprintf("w%d", i+1), "--health", "",
			"--slots", "1", "--ack-wait", "2s", "--heartbeat", "300ms", "--shutdown-timeout", "5s",
		}, cfg.workerArgs...)
		w := c.add("worker", args...)
		w.label = fmt.Sprintf("w%d", i+1)
		w.env = cfg.env
		c.workers = append(c.workers, w)
	}
	t.Cleanup(func() {
		for _, p := range c.procs {
			p.kill(t)
		}
		if t.Failed() {
			for _, p := range c.procs {
				t.Logf("--- %s (%s) output:\n%s", p.name, strings.Join(p.args, " "), tail(p.output(), 4000))
			}
		}
	})
	c.nats.start(t)
	c.waitFor("natsd ready", 30*time.Second, func() bool { return strings.Contains(c.nats.output(), "ready") })
	c.coord.start(t)
	c.waitReady()
	for _, w := range c.workers {
		w.start(t)
	}
	c.waitFor("workers' consumer", 30*time.Second, func() bool {
		info, err := c.consumerInfo()
		return err == nil && info.NumWaiting > 0
	})
	return c
}

func (c *cluster) add(name string, args ...string) *proc {
	p := &proc{name: name, args: args, log: filepath.Join(c.dir, fmt.Sprintf("%s-%d.log", name, len(c.procs)))}
	c.procs = append(c.procs, p)
	return p
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// waitFor polls cond every 50ms until it holds or timeout passes.
func (c *cluster) waitFor(what string, timeout time.Duration, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: not reached within %s", what, timeout)
		}
		<-time.After(50 * time.Millisecond)
	}
}

// waitReady waits for the coordinator's /readyz through rathctl's client.
func (c *cluster) waitReady() {
	c.t.Helper()
	c.waitFor("coordinator ready", 60*time.Second, func() bool {
		_, err := c.rathctl("runs", "list", "--limit", "1")
		return err == nil
	})
}

// rathctl runs the built rathctl against the cluster and returns stdout.
func (c *cluster) rathctl(args ...string) ([]byte, error) {
	cmd := exec.Command(bin(c.t, "rathctl"), args...)
	cmd.Env = append(append(os.Environ(), "RATH_SERVER="+c.server, "RATH_STORE=", "RATH_TOKEN="+c.token), c.ctlEnv...)
	cmd.Dir = c.dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("rathctl %s: %w: %s", strings.Join(args, " "), err, errOut.String())
	}
	return out.Bytes(), nil
}

// agentFile writes an agent spec whose scripted reply takes delay.
func (c *cluster) agentFile(delay time.Duration) string {
	c.t.Helper()
	path := filepath.Join(c.dir, fmt.Sprintf("agent-%d.yaml", delay.Milliseconds()))
	spec := fmt.Sprintf("name: slow\nmodel: scripted\nscript:\n  - content: finished after %s\n    delay_ms: %d\n", delay, delay.Milliseconds())
	if err := os.WriteFile(path, []byte(spec), 0o600); err != nil {
		c.t.Fatal(err)
	}
	return path
}

// submit submits a run through rathctl and returns it.
func (c *cluster) submit(delay time.Duration, message string) runs.Run {
	c.t.Helper()
	out, err := c.rathctl("run", "--agent", c.agentFile(delay), "--message", message, "-o", "json")
	if err != nil {
		c.t.Fatal(err)
	}
	var r runs.Run
	if err := json.Unmarshal(out, &r); err != nil {
		c.t.Fatalf("rathctl run output %q: %v", out, err)
	}
	return r
}

// run reads a run through rathctl.
func (c *cluster) run(id string) (runs.Run, error) {
	out, err := c.rathctl("runs", "show", id, "-o", "json")
	if err != nil {
		return runs.Run{}, err
	}
	var r runs.Run
	if err := json.Unmarshal(out, &r); err != nil {
		return runs.Run{}, fmt.Errorf("rathctl runs show output %q: %w", out, err)
	}
	return r, nil
}

// waitRun polls the run through rathctl until cond holds for it. Errors
// (a coordinator that is restarting) are retried until the timeout.
func (c *cluster) waitRun(id string, timeout time.Duration, what string, cond func(runs.Run) bool) runs.Run {
	c.t.Helper()
	var last runs.Run
	var lastErr error
	deadline := time.Now().Add(timeout)
	for {
		r, err := c.run(id)
		if err == nil && cond(r) {
			return r
		}
		last, lastErr = r, err
		if time.Now().After(deadline) {
			c.t.Fatalf("run %s: %s not reached within %s; last: %+v, error %v", id, what, timeout, last, lastErr)
		}
		<-time.After(100 * time.Millisecond)
	}
}

func (c *cluster) waitSucceeded(id string) runs.Run {
	c.t.Helper()
	r := c.waitRun(id, 60*time.Second, "an end", func(r runs.Run) bool { return r.Status.Terminal() })
	if r.Status != runs.RunSucceeded || r.Output == nil {
		c.t.Fatalf("run %s ended %s: %s", id, r.Status, r.Error)
	}
	return r
}

// graph opens the cluster's store directly, to check the Session Graph.
func (c *cluster) graph() store.Store {
	c.t.Helper()
	st, err := storeurl.Open(context.Background(), c.storeURL, storeurl.Options{})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = st.Close() })
	return st
}

// checkOneCommit asserts that the run's single step committed exactly one
// version: the input has one child, the run's output, found by the step id.
func (c *cluster) checkOneCommit(g store.Store, r runs.Run) {
	c.t.Helper()
	ctx := context.Background()
	children, err := g.Children(ctx, r.Input)
	if err != nil {
		c.t.Fatal(err)
	}
	if len(children) != 1 || children[0].ID != *r.Output {
		c.t.Fatalf("input %s has children %+v, want exactly the run's output %s", r.Input, children, r.Output)
	}
	v, err := g.GetByKey(ctx, r.Steps[0].ID)
	if err != nil || v.ID != *r.Output {
		c.t.Fatalf("version keyed by step %s = %v, %v; want %s", r.Steps[0].ID, v, err, r.Output)
	}
	page, err := g.List(ctx, store.ListParams{Run: r.ID})
	if err != nil {
		c.t.Fatal(err)
	}
	if len(page.Versions) != 1 {
		c.t.Fatalf("run %s produced %d versions, want 1: %+v", r.ID, len(page.Versions), page.Versions)
	}
	// The same through the API, as a user would look.
	out, err := c.rathctl("session", "list", "--run", r.ID, "-o", "json")
	if err != nil {
		c.t.Fatal(err)
	}
	var viaAPI store.Page
	if err := json.Unmarshal(out, &viaAPI); err != nil {
		c.t.Fatalf("rathctl session list output %q: %v", out, err)
	}
	if len(viaAPI.Versions) != 1 || viaAPI.Versions[0].ID != *r.Output {
		c.t.Fatalf("rathctl session list --run %s = %+v, want the one output %s", r.ID, viaAPI.Versions, r.Output)
	}
}

// bus connects a test client to the cluster's NATS server.
func (c *cluster) bus() *bus.Bus {
	c.t.Helper()
	nc, err := nats.Connect(c.natsURL)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(nc.Close)
	b, err := bus.New(context.Background(), nc, bus.Config{})
	if err != nil {
		c.t.Fatal(err)
	}
	return b
}

func (c *cluster) consumerInfo() (*jetstream.ConsumerInfo, error) {
	nc, err := nats.Connect(c.natsURL, nats.Timeout(time.Second))
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cons, err := js.Consumer(ctx, bus.JobsStream, bus.ConsumerName(bus.DefaultQueue))
	if err != nil {
		return nil, err
	}
	return cons.Info(ctx)
}

// waitDrained waits until the job queue holds nothing: no job waiting, none
// delivered and unacknowledged.
func (c *cluster) waitDrained() {
	c.t.Helper()
	c.waitFor("job queue drained", 60*time.Second, func() bool {
		info, err := c.consumerInfo()
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	})
}

// runningOn waits until the run's step runs and returns the worker process
// running it.
func (c *cluster) runningOn(id string) *proc {
	c.t.Helper()
	r := c.waitRun(id, 30*time.Second, "a running step", func(r runs.Run) bool {
		return len(r.Steps) == 1 && r.Steps[0].Status == runs.StepRunning && r.Steps[0].Worker != ""
	})
	name := r.Steps[0].Worker
	for _, w := range c.workers {
		if name == w.label {
			return w
		}
	}
	c.t.Fatalf("step runs on unknown worker %q", name)
	return nil
}

// stopNATS stops the NATS server with SIGTERM.
func (c *cluster) stopNATS() { c.nats.stop(c.t) }

// startNATS starts the NATS server again on the same port and store.
func (c *cluster) startNATS() {
	c.t.Helper()
	before := strings.Count(c.nats.output(), "ready")
	c.nats.start(c.t)
	c.waitFor("natsd ready again", 30*time.Second, func() bool { return strings.Count(c.nats.output(), "ready") > before })
}
