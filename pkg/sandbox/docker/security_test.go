package docker_test

// Security probes: each runs hostile code inside a docker sandbox and checks
// that it is stopped with the expected error while the Engine and the test
// process (the "worker") stay healthy. Outcomes are listed in
// docs/RELIABILITY.md.

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/pkg/sandbox"
	"github.com/rath-run/rath/pkg/sandbox/docker"
	"github.com/rath-run/rath/pkg/session"
)

// healthy checks the Engine answers and the sandbox still runs commands.
func healthy(t *testing.T, b *docker.Backend, sb sandbox.Sandbox) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Ping(ctx); err != nil {
		t.Fatalf("engine unhealthy after the probe: %v", err)
	}
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: "echo alive"})
	if err != nil || string(res.Stdout) != "alive\n" {
		t.Fatalf("sandbox unusable after the probe: %+v %v", res, err)
	}
}

// TestSecurityNetwork: with no egress asked for, there is no network.
func TestSecurityNetwork(t *testing.T) {
	t.Parallel()
	b := newBackend(t, docker.Config{})
	sb, _ := openSandbox(t, b, session.Spec{})
	res := exec1(t, sb, sandbox.ExecRequest{Shell: "ls /sys/class/net; wget -T 3 -q -O- http://1.1.1.1/ ; echo wget=$?; nc -w 2 8.8.8.8 53 </dev/null; echo nc=$?", Timeout: 30 * time.Second})
	out := string(res.Stdout)
	if !strings.HasPrefix(out, "lo\n") || strings.Count(out, "\n") != 3 {
		t.Errorf("interfaces other than lo, or unexpected output:\n%s", out)
	}
	if strings.Contains(out, "wget=0") || strings.Contains(out, "nc=0") {
		t.Errorf("network reachable:\n%s\n%s", out, res.Stderr)
	}
	if !strings.Contains(strings.ToLower(string(res.Stderr)), "unreachable") {
		t.Errorf("want 'network is unreachable', stderr:\n%s", res.Stderr)
	}
	healthy(t, b, sb)
}

// TestSecurityWriteOutsideWorkspace: the root filesystem is read-only (EROFS),
// /tmp is writable but noexec, and the workspace is the only writable place
// that persists.
func TestSecurityWriteOutsideWorkspace(t *testing.T) {
	t.Parallel()
	b := newBackend(t, docker.Config{})
	sb, dir := openSandbox(t, b, session.Spec{})
	res := exec1(t, sb, sandbox.ExecRequest{Shell: `
for f in /planted /etc/planted /bin/planted /workspace/../planted; do echo x > "$f" && echo "wrote $f"; done
rm -f /bin/sh && echo "removed /bin/sh"
cp /bin/busybox /tmp/bb && /tmp/bb true && echo "exec from /tmp"
echo ok > /workspace/inside && echo "wrote inside"`})
	out, errOut := string(res.Stdout), string(res.Stderr)
	if out != "wrote inside\n" {
		t.Errorf("stdout:\n%s", out)
	}
	if strings.Count(errOut, "Read-only file system") < 5 {
		t.Errorf("want EROFS for every write outside, stderr:\n%s", errOut)
	}
	if !strings.Contains(errOut, "Permission denied") {
		t.Errorf("want EACCES executing from noexec /tmp, stderr:\n%s", errOut)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "inside")); err != nil || string(data) != "ok\n" {
		t.Errorf("workspace write not visible on the host: %q %v", data, err)
	}
	healthy(t, b, sb)
}

// TestSecurityForkBomb: the pids limit stops a fork bomb; the timeout ends
// it; the sandbox works afterwards.
func TestSecurityForkBomb(t *testing.T) {
	t.Parallel()
	b := newBackend(t, docker.Config{PidsLimit: 64})
	sb, _ := openSandbox(t, b, session.Spec{})
	res := exec1(t, sb, sandbox.ExecRequest{Shell: "bomb() { bomb | bomb; }; bomb", Timeout: 3 * time.Second, MaxOutput: 4096})
	// The bomb either fizzles (forks fail at the limit and the shells exit)
	// or runs into the timeout; either way forks were refused.
	if !bytes.Contains(res.Stderr, []byte("can't fork")) && !bytes.Contains(res.Stderr, []byte("Resource temporarily unavailable")) {
		t.Errorf("no refused fork seen (timed out %v, exit %d), stderr:\n%.2000s", res.TimedOut, res.ExitCode, res.Stderr)
	}
	healthy(t, b, sb)
	pids := exec1(t, sb, sandbox.ExecRequest{Shell: "cat /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids.max 2>/dev/null"})
	if strings.TrimSpace(string(pids.Stdout)) != "64" {
		t.Errorf("pids.max inside = %q, want 64", pids.Stdout)
	}
	ps := exec1(t, sb, sandbox.ExecRequest{Shell: "ps -o args | grep -c '[b]omb'"})
	if strings.TrimSpace(string(ps.Stdout)) != "0" {
		t.Errorf("bomb processes left: %s", ps.Stdout)
	}
}

// TestSecurityMemory: allocating twice the memory limit gets the process
// OOM-killed (exit 137, not a timeout).
func TestSecurityMemory(t *testing.T) {
	t.Parallel()
	const limit = 64 << 20
	b := newBackend(t, docker.Config{Memory: limit})
	sb, _ := openSandbox(t, b, session.Spec{})
	res := exec1(t, sb, sandbox.ExecRequest{Shell: "x=$(head -c 134217728 /dev/zero | tr '\\0' a); echo survived ${#x}", Timeout: 60 * time.Second})
	if res.TimedOut || res.ExitCode != 137 || bytes.Contains(res.Stdout, []byte("survived")) {
		t.Errorf("want an OOM kill (137): %+v stdout %q stderr %q", res, res.Stdout, res.Stderr)
	}
	oom := exec1(t, sb, sandbox.ExecRequest{Shell: "grep oom_kill /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events 2>/dev/null"})
	if !bytes.Contains(oom.Stdout, []byte("oom_kill ")) || bytes.Contains(oom.Stdout, []byte("oom_kill 0")) {
		t.Errorf("no OOM kill recorded by the cgroup: %q", oom.Stdout)
	}
	healthy(t, b, sb)
}

// TestSecurityPrivilegedSyscalls: mount, unshare, chroot, setuid(0) and
// mknod fail with EPERM inside the sandbox, from a static probe binary and
// from busybox. ptrace is the exception: Docker's default seccomp profile
// allows it (kernel >= 4.8) and the sandbox's processes share one uid, so a
// command may trace the sandbox's own processes; with CAP_SYS_PTRACE dropped
// and its own PID namespace it can reach nothing else, which is asserted.
func TestSecurityPrivilegedSyscalls(t *testing.T) {
	t.Parallel()
	b := newBackend(t, docker.Config{})
	sb, dir := openSandbox(t, b, session.Spec{})
	buildProbe(t, dir)
	res := exec1(t, sb, sandbox.ExecRequest{Argv: []string{"./probe"}})
	lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
	if len(lines) != 8 {
		t.Fatalf("probe output:\n%s\n%s", res.Stdout, res.Stderr)
	}
	for _, l := range lines {
		name, rest, _ := strings.Cut(l, " ")
		if name == "ptrace_attach_init" {
			t.Logf("ptrace(PTRACE_ATTACH, 1) inside the sandbox: %s", rest)
			continue
		}
		if !strings.HasPrefix(rest, "1 ") { // EPERM
			t.Errorf("%s: %s, want EPERM", name, rest)
		}
	}
	// The only traceable processes are the sandbox's own: PID 1 is the
	// container's init, and every visible process runs as the sandbox user.
	res = exec1(t, sb, sandbox.ExecRequest{Shell: "tr '\\0' ' ' < /proc/1/cmdline; echo; for p in /proc/[0-9]*; do stat -c %u $p; done | sort -u"})
	if got := string(res.Stdout); !strings.HasPrefix(got, "/sbin/docker-init") && !strings.HasPrefix(got, "/dev/init") || !strings.HasSuffix(got, "\n65534\n") {
		t.Errorf("processes visible inside the sandbox:\n%s", got)
	}
	res = exec1(t, sb, sandbox.ExecRequest{Shell: "mount -t tmpfs none /tmp; echo mount=$?; unshare -U true; echo unshare=$?; nsenter -t 1 -m true; echo nsenter=$?"})
	for _, want := range []string{"mount=1", "unshare=1", "nsenter=1"} {
		if !strings.Contains(string(res.Stdout), want) {
			t.Errorf("busybox: want %s, got\n%s\n%s", want, res.Stdout, res.Stderr)
		}
	}
	healthy(t, b, sb)
}

// TestSecurityRunForever: a busy loop is killed at the timeout with its
// whole process tree.
func TestSecurityRunForever(t *testing.T) {
	t.Parallel()
	b := newBackend(t, docker.Config{})
	sb, _ := openSandbox(t, b, session.Spec{})
	start := time.Now()
	res := exec1(t, sb, sandbox.ExecRequest{Shell: ": rath-forever; (while :; do :; done) & sleep 1000 & while :; do :; done", Timeout: time.Second})
	if !res.TimedOut || res.ExitCode != 137 {
		t.Errorf("want timed out with 137: %+v", res)
	}
	if el := time.Since(start); el > 20*time.Second {
		t.Errorf("returned after %v", el)
	}
	ps := exec1(t, sb, sandbox.ExecRequest{Shell: "ps -o args | grep -c '[r]ath-forever'; ps -o args | grep -c '[s]leep 1000'"})
	if string(ps.Stdout) != "0\n0\n" {
		t.Errorf("processes of the killed command left: %q", ps.Stdout)
	}
	healthy(t, b, sb)
}

// TestSecurityFloodStdout: endless output on both streams is capped and
// marked truncated (the rest is read and discarded), and the timeout ends it.
func TestSecurityFloodStdout(t *testing.T) {
	t.Parallel()
	b := newBackend(t, docker.Config{})
	sb, _ := openSandbox(t, b, session.Spec{})
	const capBytes = 1 << 20
	res := exec1(t, sb, sandbox.ExecRequest{Shell: "yes flood & yes flood >&2", Timeout: 2 * time.Second, MaxOutput: capBytes})
	if !res.TimedOut || len(res.Stdout) != capBytes || !res.StdoutTruncated || len(res.Stderr) != capBytes || !res.StderrTruncated {
		t.Errorf("timed out %v, stdout %d truncated %v, stderr %d truncated %v", res.TimedOut, len(res.Stdout), res.StdoutTruncated, len(res.Stderr), res.StderrTruncated)
	}
	healthy(t, b, sb)
}

// buildProbe builds testdata/probe, statically, into the workspace dir.
func buildProbe(t *testing.T, dir string) {
	t.Helper()
	probe := filepath.Join(dir, "probe")
	build := exec.Command("go", "build", "-o", probe, "./testdata/probe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build probe: %v\n%s", err, out)
	}
	must(t, os.Chmod(probe, 0o755))
	must(t, os.Chown(probe, 65534, 65534))
}

// TestSecuritySeccompProfileRefusesPtrace: an operator's seccomp profile
// (Config.SeccompProfile) replaces the Engine's; one refusing ptrace makes
// PTRACE_ATTACH fail with EPERM.
func TestSecuritySeccompProfileRefusesPtrace(t *testing.T) {
	t.Parallel()
	profile := `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["ptrace","process_vm_readv","process_vm_writev"],"action":"SCMP_ACT_ERRNO","errnoRet":1}]}`
	b := newBackend(t, docker.Config{SeccompProfile: profile})
	sb, dir := openSandbox(t, b, session.Spec{})
	buildProbe(t, dir)
	res := exec1(t, sb, sandbox.ExecRequest{Argv: []string{"./probe"}})
	if !strings.Contains(string(res.Stdout), "ptrace_attach_init 1 ") {
		t.Fatalf("ptrace not refused with EPERM:\n%s\n%s", res.Stdout, res.Stderr)
	}
	healthy(t, b, sb)
}
