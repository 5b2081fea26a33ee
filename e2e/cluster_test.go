package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/check"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/client"
)

// The multi-container e2e: Rath as users deploy it, in containers on the
// machine's Docker Engine. scripts/images.sh builds the images (FROM
// scratch, no registry); the coordinator, three workers and a NATS server
// (e2e/natsd) run on a private Docker network; Postgres is the test's own
// database on the host cluster, reached from the containers through a TCP
// relay the test runs on the network's gateway address (so cutting a
// container off the network cuts it off Postgres too).

// dockerCLI runs the docker CLI and returns its trimmed stdout.
func dockerCLI(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// dockerCluster is a Rath deployment in containers.
type dockerCluster struct {
	t       *testing.T
	prefix  string
	tag     string
	network string
	// pgURL is the store URL the containers use (through the relay);
	// hostURL the same database from the test process.
	pgURL, hostURL string
	coord          string
	workers        []string
}

func (c *dockerCluster) docker(args ...string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := dockerCLI(ctx, args...)
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

// newDockerCluster builds the images, creates the network, the relay to
// Postgres and the NATS server, and starts the coordinator and workers.
func newDockerCluster(t *testing.T, workers int, workerArgs ...string) *dockerCluster {
	t.Helper()
	testenv.RequireDocker(t)
	hostURL := testdb.Postgres(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	c := &dockerCluster{t: t, prefix: "rath-e2e-" + hex.EncodeToString(b[:]), hostURL: hostURL}
	c.tag = c.prefix[len("rath-e2e-"):]

	// Images: the same recipe users run without a registry.
	build := exec.Command("scripts/images.sh", c.tag)
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("scripts/images.sh: %v\n%s", err, out)
	}
	var containers []string
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if t.Failed() {
			for _, name := range containers {
				logs, _ := exec.CommandContext(ctx, "docker", "logs", "--tail", "60", name).CombinedOutput()
				t.Logf("--- container %s:\n%s", name, logs)
			}
		}
		for _, name := range containers {
			_, _ = dockerCLI(ctx, "rm", "-f", "-v", name)
		}
		_, _ = dockerCLI(ctx, "network", "rm", c.network)
		for _, img := range []string{"rath-coordinator", "rath-worker", "rath-natsd"} {
			_, _ = dockerCLI(ctx, "rmi", img+":"+c.tag)
		}
	})

	c.network = c.prefix
	c.docker("network", "create", "--driver", "bridge", c.network)
	gateway := c.docker("network", "inspect", "-f", "{{(index .IPAM.Config 0).Gateway}}", c.network)
	c.pgURL = relayPostgres(t, hostURL, gateway)

	run := func(name string, args ...string) {
		t.Helper()
		containers = append(containers, name)
		c.docker(append([]string{"run", "-d", "--name", name, "--hostname", name, "--network", c.network}, args...)...)
	}
	natsName := c.prefix + "-nats"
	run(natsName, "rath-natsd:"+c.tag)
	natsURL := "nats://" + natsName + ":4222"

	c.coord = c.prefix + "-coordinator"
	run(c.coord, "-e", "RATH_STORE="+c.pgURL, "-e", "NATS_URL="+natsURL,
		"rath-coordinator:"+c.tag, "--reconcile-interval", "1s", "--stale-after", "10s")
	c.waitReady()

	for i := range workers {
		name := fmt.Sprintf("%s-w%d", c.prefix, i+1)
		c.workers = append(c.workers, name)
		run(name, append([]string{"-e", "RATH_STORE=" + c.pgURL, "-e", "NATS_URL=" + natsURL, "rath-worker:" + c.tag,
			"--name", name, "--health", "", "--ack-wait", "2s", "--heartbeat", "300ms", "--shutdown-timeout", "10s"},
			workerArgs...)...)
	}
	return c
}

// relayPostgres relays TCP connections from a listener on the Docker
// network's gateway (the host's side of the bridge) to the Postgres server
// of hostURL, and returns hostURL with the relay's address.
func relayPostgres(t *testing.T, hostURL, gateway string) string {
	t.Helper()
	u, err := url.Parse(hostURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(gateway, "0"))
	if err != nil {
		t.Fatalf("relay on the Docker gateway %s: %v", gateway, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]struct{}{}
	track := func(c net.Conn, add bool) {
		mu.Lock()
		defer mu.Unlock()
		if add {
			conns[c] = struct{}{}
		} else {
			delete(conns, c)
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", u.Host)
			if err != nil {
				_ = in.Close()
				continue
			}
			track(in, true)
			track(out, true)
			wg.Add(2)
			pipe := func(dst, src net.Conn) {
				defer wg.Done()
				_, _ = io.Copy(dst, src)
				_ = dst.Close()
				_ = src.Close()
				track(dst, false)
				track(src, false)
			}
			go pipe(in, out)
			go pipe(out, in)
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	relay := *u
	relay.Host = ln.Addr().String()
	return relay.String()
}

// ip returns a container's address on the cluster network.
func (c *dockerCluster) ip(name string) string {
	c.t.Helper()
	return c.docker("inspect", "-f", fmt.Sprintf("{{(index .NetworkSettings.Networks %q).IPAddress}}", c.network), name)
}

// client returns an API client of the coordinator at its current address
// (a restarted container may get another one).
func (c *dockerCluster) client() *client.Client {
	c.t.Helper()
	cl, err := client.New("http://"+net.JoinHostPort(c.ip(c.coord), "7420"), "")
	if err != nil {
		c.t.Fatal(err)
	}
	return cl
}

// waitReady waits until the coordinator answers /readyz.
func (c *dockerCluster) waitReady() {
	c.t.Helper()
	testenv.Eventually(c.t, 90*time.Second, "coordinator container ready", func() bool {
		ip, err := dockerCLI(context.Background(), "inspect", "-f",
			fmt.Sprintf("{{(index .NetworkSettings.Networks %q).IPAddress}}", c.network), c.coord)
		if err != nil || ip == "" {
			return false
		}
		cl, err := client.New("http://"+net.JoinHostPort(ip, "7420"), "")
		if err != nil {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return cl.Do(ctx, "GET", "/readyz", nil, nil) == nil
	})
}

// stop sends a container SIGTERM and waits up to grace for it to exit, and
// returns its exit code. A container still running after grace gets
// SIGQUIT (a Go process dumps its goroutines) and fails the test with the
// end of its log.
func (c *dockerCluster) stop(name string, grace time.Duration) int {
	c.t.Helper()
	c.docker("kill", "-s", "TERM", name)
	exited := func() bool {
		out, err := dockerCLI(context.Background(), "inspect", "-f", "{{.State.Running}}", name)
		return err == nil && out == "false"
	}
	deadline := time.Now().Add(grace)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !exited() {
		if time.Now().After(deadline) {
			_, _ = dockerCLI(context.Background(), "kill", "-s", "QUIT", name)
			testenv.Eventually(c.t, 30*time.Second, name+" gone after SIGQUIT", exited)
			logs, _ := exec.Command("docker", "logs", "--tail", "400", name).CombinedOutput()
			c.t.Fatalf("%s still running %s after SIGTERM; its log ends:\n%s", name, grace, logs)
		}
		<-tick.C
	}
	code, err := strconv.Atoi(c.docker("inspect", "-f", "{{.State.ExitCode}}", name))
	if err != nil {
		c.t.Fatal(err)
	}
	return code
}

func dcCount(t *testing.T, db *sql.DB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// runningOn waits until committed steps reach at least n and a step runs
// on one of candidates, and returns that worker.
func runningOn(t *testing.T, db *sql.DB, n int, candidates []string, what string) string {
	t.Helper()
	var worker string
	testenv.Eventually(t, 2*time.Minute, what, func() bool {
		if dcCount(t, db, `SELECT COUNT(*) FROM steps WHERE status = 'committed'`) < n {
			return false
		}
		for _, w := range candidates {
			var id string
			err := db.QueryRow(`SELECT id FROM steps WHERE status = 'running' AND worker = $1 LIMIT 1`, w).Scan(&id)
			if err == nil {
				worker = w
				return true
			}
		}
		return false
	})
	return worker
}

// waitCommitted waits until at least n steps committed.
func waitCommitted(t *testing.T, db *sql.DB, n int, what string) {
	t.Helper()
	testenv.Eventually(t, 2*time.Minute, what, func() bool {
		return dcCount(t, db, `SELECT COUNT(*) FROM steps WHERE status = 'committed'`) >= n
	})
}

// TestDockerCluster runs 200 single-step runs (scripted model, 400 ms a
// step) on a coordinator and three workers in containers, and meanwhile:
// docker kill of a worker with a step in flight; docker network disconnect
// of another with a step in flight, reconnected after more steps commit;
// then a rolling restart of the coordinator and every worker with docker
// stop (SIGTERM: workers drain and exit 0). Every run must succeed, every
// step commit exactly one version (keyed by its step id), and the
// invariant checker must pass.
func TestDockerCluster(t *testing.T) {
	const nRuns = 200
	c := newDockerCluster(t, 3, "--slots", "2")
	db, err := sql.Open("pgx", c.hostURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })

	// Submit every run up front from 8 clients.
	spec := json.RawMessage(`{"name":"cluster","model":"scripted","script":[{"content":"ok","delay_ms":400}]}`)
	cl := c.client()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < nRuns; i += 8 {
				var r runs.Run
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				err := cl.Do(ctx, "POST", "/v1/runs", map[string]any{"agent": spec, "message": fmt.Sprintf("cluster step %d", i)}, &r)
				cancel()
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("submit: %v", err)
	}
	start := time.Now()

	// docker kill: SIGKILL, the container's steps are redelivered after the
	// ack wait.
	killed := runningOn(t, db, 20, c.workers, "a worker with a step in flight after 20 commits")
	c.docker("kill", killed)
	t.Logf("docker kill %s after %s", killed, time.Since(start).Round(time.Millisecond))

	// docker network disconnect: the worker loses NATS and Postgres; its
	// heartbeats stop, its jobs are redelivered; when it comes back its
	// late commits must find the steps committed.
	var others []string
	for _, w := range c.workers {
		if w != killed {
			others = append(others, w)
		}
	}
	cut := runningOn(t, db, 50, others, "a worker with a step in flight after 50 commits")
	c.docker("network", "disconnect", c.network, cut)
	t.Logf("docker network disconnect %s after %s", cut, time.Since(start).Round(time.Millisecond))
	waitCommitted(t, db, 80, "80 commits with a worker cut off")
	c.docker("network", "connect", c.network, cut)
	c.docker("start", killed)
	t.Logf("reconnected %s, restarted %s after %s", cut, killed, time.Since(start).Round(time.Millisecond))

	// Rolling restart under load: the coordinator, then each worker, with
	// SIGTERM. A worker drains (finishes its steps or hands them back) and
	// exits 0.
	waitCommitted(t, db, 100, "100 commits")
	if code := c.stop(c.coord, 10*time.Second); code != 0 {
		t.Errorf("coordinator exited %d on SIGTERM, want 0", code)
	}
	c.docker("start", c.coord)
	c.waitReady()
	for i, w := range c.workers {
		waitCommitted(t, db, 110+15*i, fmt.Sprintf("progress before restarting %s", w))
		if code := c.stop(w, 20*time.Second); code != 0 {
			t.Errorf("worker %s exited %d on SIGTERM, want 0 (a drained worker)", w, code)
		}
		c.docker("start", w)
	}
	t.Logf("rolling restart done after %s", time.Since(start).Round(time.Millisecond))

	testenv.Eventually(t, 3*time.Minute, "every run ended", func() bool {
		return dcCount(t, db, `SELECT COUNT(*) FROM runs WHERE status IN ('pending', 'running')`) == 0
	})
	elapsed := time.Since(start)
	if n := dcCount(t, db, `SELECT COUNT(*) FROM runs WHERE status = 'succeeded'`); n != nRuns {
		var firstErr string
		_ = db.QueryRow(`SELECT error FROM runs WHERE status <> 'succeeded' LIMIT 1`).Scan(&firstErr)
		t.Fatalf("%d of %d runs succeeded; e.g. %q", n, nRuns, firstErr)
	}
	// Exactly once: one step version per step, keyed by the step id, and it
	// is the step's recorded output.
	if n := dcCount(t, db, `SELECT COUNT(*) FROM versions WHERE op = 'step'`); n != nRuns {
		t.Fatalf("%d step versions for %d steps", n, nRuns)
	}
	if n := dcCount(t, db, `SELECT COUNT(*) FROM steps s JOIN versions v ON v.key = s.id AND v.id = s.output_id WHERE s.status = 'committed'`); n != nRuns {
		t.Fatalf("%d steps have their keyed version as output, want %d", n, nRuns)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := check.Run(ctx, c.hostURL, check.Options{Settled: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("invariant checker: %v", rep.Problems)
	}
	redelivered := dcCount(t, db, `SELECT COUNT(*) FROM steps WHERE attempts > 1`)
	t.Logf("%d runs on 3 worker containers: all succeeded, %d step versions, %d steps redelivered, %s after submission",
		nRuns, nRuns, redelivered, elapsed.Round(100*time.Millisecond))
	if redelivered == 0 {
		t.Errorf("no step was redelivered: the kill and the disconnect hit no step in flight")
	}
}

// TestComposeConfig validates docker-compose.yml with the Compose CLI this
// machine has (`docker compose` v2 or docker-compose v1): schema, merge
// keys and interpolation.
func TestComposeConfig(t *testing.T) {
	testenv.RequireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var cli []string
	if _, err := dockerCLI(ctx, "compose", "version"); err == nil {
		cli = []string{"docker", "compose"}
	} else if _, err := exec.LookPath("docker-compose"); err == nil {
		cli = []string{"docker-compose"}
	} else {
		testenv.DockerUnavailable(t, "neither `docker compose` nor docker-compose is installed")
	}
	cmd := exec.CommandContext(ctx, cli[0], append(cli[1:], "-f", "docker-compose.yml", "config")...)
	cmd.Dir = ".."
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s config: %v\n%s", strings.Join(cli, " "), err, errOut.String())
	}
	// The rendered file keeps what the deployment relies on.
	for _, want := range []string{"condition: service_healthy", "condition: service_completed_successfully",
		"/var/run/docker.sock", "stop_grace_period: 40s", "synchronous_commit=on"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("rendered compose file lacks %q", want)
		}
	}
}
