package local_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/sandbox"
	"github.com/rath-run/rath/pkg/sandbox/local"
	"github.com/rath-run/rath/pkg/sandbox/sandboxtest"
	"github.com/rath-run/rath/pkg/session"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T, spec session.Spec) (sandbox.Sandbox, string) {
	t.Helper()
	dir := sandboxtest.Dir(t)
	sb, err := local.New(local.Config{}).Open(t.Context(), spec, dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = sb.Close(context.Background()) })
	return sb, dir
}

func TestExecBasics(t *testing.T) {
	t.Parallel()
	sb, _ := open(t, session.Spec{Env: map[string]string{"FROM_SPEC": "spec"}})
	ctx := t.Context()

	res, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: `echo out; echo err >&2; echo "$FROM_SPEC $FROM_REQ"; exit 3`, Env: map[string]string{"FROM_REQ": "req"}})
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	if res.ExitCode != 3 || string(res.Stdout) != "out\nspec req\n" || string(res.Stderr) != "err\n" || res.TimedOut {
		t.Fatalf("result = %+v (stdout %q stderr %q)", res, res.Stdout, res.Stderr)
	}

	res, err = sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"cat"}, Stdin: []byte("from stdin")})
	if err != nil || string(res.Stdout) != "from stdin" || res.ExitCode != 0 {
		t.Fatalf("cat: %+v, %v", res, err)
	}

	_, err = sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"no-such-command-rath"}})
	if !errors.Is(err, sandbox.ErrCommandNotFound) {
		t.Fatalf("missing command: err = %v, want ErrCommandNotFound", err)
	}
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{}); err == nil {
		t.Fatal("empty request: no error")
	}
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"true"}, Shell: "true"}); err == nil {
		t.Fatal("argv and shell: no error")
	}
}

func TestWorkingDirectoryAndHome(t *testing.T) {
	t.Parallel()
	sb, dir := open(t, session.Spec{})
	ctx := t.Context()
	if err := sb.WriteFile(ctx, "sub/f.txt", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: `pwd; echo "$HOME"; ls`, Dir: "sub"})
	if err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(dir)
	want := filepath.Join(real, "sub") + "\n" + dir + "\nf.txt\n"
	if string(res.Stdout) != want {
		t.Fatalf("stdout = %q, want %q", res.Stdout, want)
	}
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: "pwd", Dir: "../"}); !errors.Is(err, sandbox.ErrOutsideWorkspace) {
		t.Fatalf("Dir ../: err = %v", err)
	}
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: "pwd", Dir: "missing"}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Dir missing: err = %v", err)
	}
}

// TestEnvironmentLeak: a secret in the worker's environment is invisible to
// commands.
func TestEnvironmentLeak(t *testing.T) {
	t.Setenv("RATH_FAKE_SECRET", "sk-live-do-not-leak")
	t.Setenv("OPENAI_API_KEY", "sk-openai-do-not-leak")
	sb, _ := open(t, session.Spec{})
	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Argv: []string{"env"}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("env: %+v %v", res, err)
	}
	if bytes.Contains(res.Stdout, []byte("do-not-leak")) || bytes.Contains(res.Stdout, []byte("RATH_FAKE_SECRET")) {
		t.Fatalf("worker secret visible to the command:\n%s", res.Stdout)
	}
	names := map[string]bool{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(res.Stdout)), "\n") {
		k, _, _ := strings.Cut(line, "=")
		names[k] = true
	}
	allowed := map[string]bool{"PATH": true, "HOME": true, "TMPDIR": true, "LANG": true, "LC_ALL": true, "TZ": true, "PWD": true, "SHLVL": true, "_": true}
	for k := range names {
		if !allowed[k] {
			t.Errorf("variable %s passed to the command; not on the allow-list", k)
		}
	}
}

// TestRunawayProcessTreeKilled: on timeout the command and every process it
// started are killed.
func TestRunawayProcessTreeKilled(t *testing.T) {
	t.Parallel()
	sb, dir := open(t, session.Spec{})
	start := time.Now()
	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{
		Shell:   `sleep 300 & echo $! > pids; (sleep 300 & echo $! >> pids; wait) & echo $! >> pids; wait`,
		Timeout: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode != 128+int(syscall.SIGKILL) {
		t.Fatalf("result = %+v, want timed out with exit 137", res)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("Exec returned after %v", el)
	}
	data, err := os.ReadFile(filepath.Join(dir, "pids"))
	if err != nil {
		t.Fatal(err)
	}
	pids := strings.Fields(string(data))
	if len(pids) != 3 {
		t.Fatalf("pids file = %q", data)
	}
	for _, p := range pids {
		pid, _ := strconv.Atoi(p)
		waitDead(t, pid)
	}
}

// TestBackgroundProcessDoesNotOutliveCall: a command that exits leaving a
// background process behind has it killed.
func TestBackgroundProcessDoesNotOutliveCall(t *testing.T) {
	t.Parallel()
	sb, dir := open(t, session.Spec{})
	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Shell: `sleep 300 >/dev/null 2>&1 & echo $! > pid`})
	if err != nil || res.ExitCode != 0 || res.TimedOut {
		t.Fatalf("%+v %v", res, err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	waitDead(t, pid)
}

// waitDead polls until pid is gone or a zombie.
func waitDead(t *testing.T, pid int) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("process %d to be gone or a zombie", pid), func() bool {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		return len(f) > 0 && f[0] == "Z"
	})
}

func TestOutputTruncated(t *testing.T) {
	t.Parallel()
	sb, _ := open(t, session.Spec{})
	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{
		Shell:     `yes flood | head -c 1000000; yes err | head -c 5000 >&2`,
		MaxOutput: 1000,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stdout) != 1000 || !res.StdoutTruncated || len(res.Stderr) != 1000 || !res.StderrTruncated || res.ExitCode != 0 {
		t.Fatalf("len(stdout)=%d trunc=%v len(stderr)=%d trunc=%v exit=%d", len(res.Stdout), res.StdoutTruncated, len(res.Stderr), res.StderrTruncated, res.ExitCode)
	}
}

// TestPathConfinement: path traversal, absolute paths and symlink escapes
// are refused with ErrOutsideWorkspace naming the path.
func TestPathConfinement(t *testing.T) {
	t.Parallel()
	sb, dir := open(t, session.Spec{})
	ctx := t.Context()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	must(t, os.Symlink(outside, filepath.Join(dir, "out")))
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "abs-link")))
	must(t, os.Symlink("../"+filepath.Base(outside)+"/secret", filepath.Join(dir, "rel-link")))
	must(t, os.Mkdir(filepath.Join(dir, "in"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "in", "ok"), []byte("ok"), 0o644))
	must(t, os.Symlink("in/ok", filepath.Join(dir, "inside-link")))

	for _, p := range []string{
		"../secret", "a/../../secret", "/etc/passwd", filepath.Join(outside, "secret"),
		"out/secret", "abs-link", "rel-link", "out",
	} {
		if _, err := sb.ReadFile(ctx, p, 0); !errors.Is(err, sandbox.ErrOutsideWorkspace) || !strings.Contains(err.Error(), p) {
			t.Errorf("ReadFile(%q) err = %v, want ErrOutsideWorkspace naming the path", p, err)
		}
		if err := sb.WriteFile(ctx, p, []byte("x"), 0); !errors.Is(err, sandbox.ErrOutsideWorkspace) {
			t.Errorf("WriteFile(%q) err = %v", p, err)
		}
		if _, err := sb.Stat(ctx, p); !errors.Is(err, sandbox.ErrOutsideWorkspace) {
			t.Errorf("Stat(%q) err = %v", p, err)
		}
		if _, err := sb.List(ctx, p); !errors.Is(err, sandbox.ErrOutsideWorkspace) {
			t.Errorf("List(%q) err = %v", p, err)
		}
	}
	// Writing through a symlinked directory is refused and leaves the host untouched.
	if err := sb.WriteFile(ctx, "out/planted", []byte("x"), 0); !errors.Is(err, sandbox.ErrOutsideWorkspace) {
		t.Errorf("write through symlinked dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "planted")); err == nil {
		t.Error("file planted outside the workspace")
	}
	// Symlinks inside the workspace work.
	if data, err := sb.ReadFile(ctx, "inside-link", 0); err != nil || string(data) != "ok" {
		t.Errorf("inside link: %q %v", data, err)
	}
	if data, err := sb.ReadFile(ctx, "in/../in/ok", 0); err != nil || string(data) != "ok" {
		t.Errorf("in/../in/ok: %q %v", data, err)
	}
}

func TestFiles(t *testing.T) {
	t.Parallel()
	sb, dir := open(t, session.Spec{})
	ctx := t.Context()
	must(t, sb.WriteFile(ctx, "a/b/c.txt", []byte("hello"), 0o600))
	must(t, sb.WriteFile(ctx, "z.txt", []byte("z"), 0))
	data, err := sb.ReadFile(ctx, "a/b/c.txt", 0)
	if err != nil || string(data) != "hello" {
		t.Fatalf("read: %q %v", data, err)
	}
	if _, err := sb.ReadFile(ctx, "a/b/c.txt", 4); !errors.Is(err, sandbox.ErrTooLarge) {
		t.Fatalf("limit: %v", err)
	}
	fi, err := sb.Stat(ctx, "a/b/c.txt")
	if err != nil || fi.Size != 5 || fi.IsDir || fi.Mode.Perm() != 0o600 || fi.Path != "a/b/c.txt" || fi.Name != "c.txt" {
		t.Fatalf("stat: %+v %v", fi, err)
	}
	st, _ := os.Stat(filepath.Join(dir, "z.txt"))
	if st.Mode().Perm() != 0o644 {
		t.Fatalf("default perm = %v", st.Mode().Perm())
	}
	list, err := sb.List(ctx, ".")
	if err != nil || len(list) != 2 || list[0].Name != "a" || !list[0].IsDir || list[1].Path != "z.txt" {
		t.Fatalf("list: %+v %v", list, err)
	}
	if _, err := sb.ReadFile(ctx, "nope", 0); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
	if _, err := sb.Stat(ctx, "a/nope"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("stat missing: %v", err)
	}
	if _, err := sb.List(ctx, "z.txt"); err == nil {
		t.Fatal("list of a file: no error")
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	sb, dir := open(t, session.Spec{})
	ctx := t.Context()
	done := make(chan sandbox.ExecResult, 1)
	go func() {
		res, _ := sb.Exec(ctx, sandbox.ExecRequest{Shell: "echo > started; sleep 300", Timeout: time.Minute})
		done <- res
	}()
	testenv.Eventually(t, 10*time.Second, "the command to start", func() bool {
		_, err := os.Stat(filepath.Join(dir, "started"))
		return err == nil
	})
	must(t, sb.Close(ctx))
	must(t, sb.Close(ctx)) // idempotent
	select {
	case res := <-done:
		if res.ExitCode != 137 {
			t.Fatalf("killed command exit = %d, want 137", res.ExitCode)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Exec did not return after Close")
	}
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: "true"}); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
	if _, err := sb.ReadFile(ctx, "started", 0); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
