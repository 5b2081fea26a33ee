package docker_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"go.uber.org/goleak"

	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/sandbox"
	"github.com/rath-run/rath/pkg/sandbox/docker"
	"github.com/rath-run/rath/pkg/sandbox/sandboxtest"
	"github.com/rath-run/rath/pkg/session"
)

// engine is the Engine client shared by the tests; nil when unreachable.
var (
	engine    *client.Client
	engineErr error
)

func TestMain(m *testing.M) {
	engineErr = setup()
	code := m.Run()
	if engine != nil {
		engine.Close()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// setup connects to the Engine, removes sandbox containers a previous run
// left behind and builds the default image when missing.
func setup() error {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		cli.Close()
		return err
	}
	engine = cli
	prune()
	script, _ := filepath.Abs("../../../scripts/sandbox-image.sh")
	cmd := exec.Command(script)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build the sandbox image with %s: %w", script, err)
	}
	return nil
}

// prune removes sandbox containers left by test processes that are gone
// (containers of other, live test processes are theirs).
func prune() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := docker.New(docker.Config{Client: engine})
	if err != nil {
		return
	}
	if n, err := b.RemoveOrphans(ctx); err != nil || n > 0 {
		fmt.Fprintf(os.Stderr, "removed %d leftover sandbox containers (%v)\n", n, err)
	}
}

// newBackend returns a backend on the machine's Engine. Without an Engine
// the test is skipped, unless RATH_REQUIRE_DOCKER=1 or CI=true, when it
// fails.
func newBackend(t testing.TB, cfg docker.Config) *docker.Backend {
	t.Helper()
	if engineErr != nil {
		testenv.DockerUnavailable(t, "%v", engineErr)
	}
	cfg.Client = engine
	b, err := docker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func openSandbox(t testing.TB, b *docker.Backend, spec session.Spec) (*docker.Sandbox, string) {
	t.Helper()
	dir := t.TempDir()
	sb, err := b.Open(context.Background(), spec, dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = sb.Close(context.Background()) })
	return sb.(*docker.Sandbox), dir
}

func exec1(t testing.TB, sb sandbox.Sandbox, req sandbox.ExecRequest) sandbox.ExecResult {
	t.Helper()
	res, err := sb.Exec(context.Background(), req)
	if err != nil {
		t.Fatalf("Exec(%q %q): %v", req.Argv, req.Shell, err)
	}
	return res
}

func TestConformance(t *testing.T) {
	t.Parallel()
	b := newBackend(t, docker.Config{})
	sandboxtest.Run(t, func(t *testing.T) (sandbox.Sandbox, string) {
		return openSandbox(t, b, session.Spec{})
	})
}

// TestContainerLifecycle: created on first use, reused across calls,
// removed on Close.
func TestContainerLifecycle(t *testing.T) {
	t.Parallel()
	b := newBackend(t, docker.Config{})
	sb, _ := openSandbox(t, b, session.Spec{})
	if sb.ContainerID() != "" {
		t.Fatal("container created before first use")
	}
	must(t, sb.WriteFile(t.Context(), "f", []byte("x"), 0))
	if sb.ContainerID() != "" {
		t.Fatal("a file operation created a container")
	}
	exec1(t, sb, sandbox.ExecRequest{Shell: "true"})
	id := sb.ContainerID()
	if id == "" {
		t.Fatal("no container after Exec")
	}
	exec1(t, sb, sandbox.ExecRequest{Shell: "true"})
	if sb.ContainerID() != id {
		t.Fatal("container not reused")
	}
	must(t, sb.Close(t.Context()))
	if _, err := engine.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{}); err == nil {
		t.Fatal("container still exists after Close")
	}
}

// TestIdleReaper: an idle sandbox's container is removed; the next call
// gets a fresh one over the same workspace.
func TestIdleReaper(t *testing.T) {
	t.Parallel()
	b := newBackend(t, docker.Config{IdleTimeout: 200 * time.Millisecond})
	sb, _ := openSandbox(t, b, session.Spec{})
	exec1(t, sb, sandbox.ExecRequest{Shell: "echo kept > f"})
	id := sb.ContainerID()
	testenv.Eventually(t, 30*time.Second, "the idle container to be reaped", func() bool { return sb.ContainerID() == "" })
	waitGone(t, id)
	res := exec1(t, sb, sandbox.ExecRequest{Shell: "cat f"})
	if string(res.Stdout) != "kept\n" || sb.ContainerID() == id {
		t.Fatalf("after reaping: %q, container %s (old %s)", res.Stdout, sb.ContainerID(), id)
	}
}

func waitGone(t *testing.T, id string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("container %s to be removed", id), func() bool {
		_, err := engine.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
		return err != nil
	})
}

func TestSpecNetworkRefused(t *testing.T) {
	t.Parallel()
	b := newBackend(t, docker.Config{})
	for _, n := range []string{"host", "container:abc", "bridge", "rath-user-defined", "default"} {
		if _, err := b.Open(t.Context(), session.Spec{Network: n}, t.TempDir()); err == nil || !strings.Contains(err.Error(), n) {
			t.Errorf("network %q: err = %v, want a refusal naming it", n, err)
		}
	}
	noEgress := newBackend(t, docker.Config{EgressNetwork: docker.NoEgress})
	if _, err := noEgress.Open(t.Context(), session.Spec{Network: "egress"}, t.TempDir()); err == nil || !strings.Contains(err.Error(), "egress") {
		t.Errorf("egress with no egress network granted: err = %v, want a refusal", err)
	}
}

func TestRootUserRefused(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"0", "0:0", "root"} {
		if _, err := docker.New(docker.Config{User: u, Client: engine}); err == nil {
			t.Errorf("user %q accepted", u)
		}
	}
}

// TestHardeningInspect: docker inspect of a sandbox shows every hardening
// flag, and the process inside sees them.
func TestHardeningInspect(t *testing.T) {
	t.Parallel()
	b := newBackend(t, docker.Config{})
	sb, dir := openSandbox(t, b, session.Spec{})
	res := exec1(t, sb, sandbox.ExecRequest{Shell: "grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status; id -u"})
	in, err := engine.ContainerInspect(t.Context(), sb.ContainerID(), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := in.Container
	hc := c.HostConfig
	check := func(name string, ok bool, got any) {
		t.Helper()
		if !ok {
			t.Errorf("%s: got %v", name, got)
		}
	}
	check("NetworkMode none", hc.NetworkMode == "none", hc.NetworkMode)
	check("CapDrop ALL", slices.Equal(hc.CapDrop, []string{"ALL"}), hc.CapDrop)
	check("CapAdd empty", len(hc.CapAdd) == 0, hc.CapAdd)
	check("no-new-privileges", slices.Contains(hc.SecurityOpt, "no-new-privileges"), hc.SecurityOpt)
	check("not privileged", !hc.Privileged, hc.Privileged)
	check("ReadonlyRootfs", hc.ReadonlyRootfs, hc.ReadonlyRootfs)
	check("tmpfs /tmp small, noexec", strings.Contains(hc.Tmpfs["/tmp"], fmt.Sprintf("size=%d", docker.DefaultTmpSize)) && strings.Contains(hc.Tmpfs["/tmp"], "noexec"), hc.Tmpfs)
	check("memory limit", hc.Memory == docker.DefaultMemory, hc.Memory)
	check("no swap", hc.MemorySwap == docker.DefaultMemory, hc.MemorySwap)
	check("pids limit", hc.PidsLimit != nil && *hc.PidsLimit == docker.DefaultPidsLimit, hc.PidsLimit)
	check("cpu limit", hc.NanoCPUs == docker.DefaultNanoCPUs, hc.NanoCPUs)
	check("init", hc.Init != nil && *hc.Init, hc.Init)
	check("private ipc", hc.IpcMode == "private", hc.IpcMode)
	check("non-root user", c.Config.User != "" && !strings.HasPrefix(c.Config.User, "0:") && c.Config.User != "0", c.Config.User)
	check("label", c.Config.Labels[docker.Label] == "1", c.Config.Labels)
	var ws bool
	for _, m := range c.Mounts {
		if m.Destination == "/workspace" {
			ws = m.RW && m.Source == dir
		}
	}
	check("workspace bind-mounted writable at /workspace", ws, c.Mounts)

	out := string(res.Stdout)
	for _, want := range []string{"CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2", "65534\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("inside the sandbox: missing %q in\n%s", want, out)
		}
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestRemoveOrphans: containers of a dead creator on this host are removed;
// a live creator's are kept.
func TestRemoveOrphans(t *testing.T) {
	t.Parallel()
	b := newBackend(t, docker.Config{})
	sb, _ := openSandbox(t, b, session.Spec{})
	exec1(t, sb, sandbox.ExecRequest{Shell: "true"})
	live := sb.ContainerID()
	// A container labeled as made by a process that has exited.
	dead := exec.Command("true")
	must(t, dead.Run())
	host, _ := os.Hostname()
	res, err := engine.ContainerCreate(t.Context(), client.ContainerCreateOptions{
		Image: docker.DefaultImage,
		Config: &container.Config{Cmd: []string{"true"}, Labels: map[string]string{
			docker.Label: "1", docker.Label + ".owner": fmt.Sprintf("%s:%d", host, dead.Process.Pid),
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.RemoveOrphans(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitGone(t, res.ID)
	if _, err := engine.ContainerInspect(t.Context(), live, client.ContainerInspectOptions{}); err != nil {
		t.Fatalf("live sandbox's container removed: %v", err)
	}
}
