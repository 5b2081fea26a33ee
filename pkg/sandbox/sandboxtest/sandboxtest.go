// Package sandboxtest is the conformance suite every sandbox backend passes:
// the same commands and file operations give the same results (exit codes,
// output, truncation and timeout flags, and the same errors for missing
// files, missing commands, closed sandboxes and paths outside the
// workspace).
//
// Commands are POSIX sh and busybox-compatible, so the suite runs on the
// local backend and in the default docker image alike.
package sandboxtest

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/pkg/sandbox"
)

// OpenFunc opens a fresh sandbox over a fresh workspace directory, which it
// returns. The suite closes the sandbox; the caller removes the directory.
type OpenFunc func(t *testing.T) (sb sandbox.Sandbox, dir string)

// Run runs the suite. One sandbox serves most cases (a docker sandbox's
// container is created once), each case in its own subdirectory.
func Run(t *testing.T, open OpenFunc) {
	sb, _ := open(t)
	t.Cleanup(func() { _ = sb.Close(context.Background()) })
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := strings.ReplaceAll(c.name, " ", "_")
			if err := sb.WriteFile(t.Context(), dir+"/.keep", nil, 0); err != nil {
				t.Fatalf("WriteFile(%s/.keep): %v", dir, err)
			}
			c.run(t, sb, dir)
		})
	}
	t.Run("closed", func(t *testing.T) { testClosed(t, open) })
}

var cases = []struct {
	name string
	run  func(t *testing.T, sb sandbox.Sandbox, dir string)
}{
	{"exit codes", testExitCodes},
	{"output streams", testOutput},
	{"argv is not reparsed", testArgv},
	{"stdin", testStdin},
	{"env", testEnv},
	{"working dir", testDir},
	{"truncation", testTruncation},
	{"timeout", testTimeout},
	{"missing command", testMissingCommand},
	{"files", testFiles},
	{"files and commands agree", testFilesAndCommands},
	{"outside workspace", testOutside},
	{"executable file", testExecutable},
}

func run(t *testing.T, sb sandbox.Sandbox, req sandbox.ExecRequest) sandbox.ExecResult {
	t.Helper()
	res, err := sb.Exec(t.Context(), req)
	if err != nil {
		t.Fatalf("Exec(%+v): %v", req, err)
	}
	return res
}

func testExitCodes(t *testing.T, sb sandbox.Sandbox, dir string) {
	for _, c := range []struct {
		shell string
		want  int
	}{
		{"true", 0}, {"false", 1}, {"exit 3", 3}, {"exit 255", 255}, {"kill -9 $$", 137},
	} {
		res := run(t, sb, sandbox.ExecRequest{Shell: c.shell, Dir: dir})
		if res.ExitCode != c.want || res.TimedOut {
			t.Errorf("%q: exit %d timedOut %v, want %d", c.shell, res.ExitCode, res.TimedOut, c.want)
		}
	}
}

func testOutput(t *testing.T, sb sandbox.Sandbox, dir string) {
	res := run(t, sb, sandbox.ExecRequest{Shell: `printf 'a\nb'; printf 'e1\n' >&2; printf c; printf e2 >&2`, Dir: dir})
	if string(res.Stdout) != "a\nbc" || string(res.Stderr) != "e1\ne2" || res.StdoutTruncated || res.StderrTruncated {
		t.Errorf("stdout %q stderr %q truncated %v/%v", res.Stdout, res.Stderr, res.StdoutTruncated, res.StderrTruncated)
	}
	res = run(t, sb, sandbox.ExecRequest{Shell: "true", Dir: dir})
	if len(res.Stdout) != 0 || len(res.Stderr) != 0 {
		t.Errorf("silent command: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
}

func testArgv(t *testing.T, sb sandbox.Sandbox, dir string) {
	res := run(t, sb, sandbox.ExecRequest{Argv: []string{"printf", "%s|", "a b", "$HOME", "'q'", `"d"`, ""}, Dir: dir})
	if want := `a b|$HOME|'q'|"d"||`; string(res.Stdout) != want || res.ExitCode != 0 {
		t.Errorf("stdout %q exit %d, want %q", res.Stdout, res.ExitCode, want)
	}
}

func testStdin(t *testing.T, sb sandbox.Sandbox, dir string) {
	in := bytes.Repeat([]byte("line\n"), 20000) // 100 KB, more than a pipe buffer
	res := run(t, sb, sandbox.ExecRequest{Argv: []string{"wc", "-l"}, Stdin: in, Dir: dir})
	if strings.TrimSpace(string(res.Stdout)) != "20000" {
		t.Errorf("wc -l of stdin = %q", res.Stdout)
	}
	res = run(t, sb, sandbox.ExecRequest{Shell: "cat", Dir: dir})
	if len(res.Stdout) != 0 || res.ExitCode != 0 {
		t.Errorf("cat with no stdin: %q exit %d", res.Stdout, res.ExitCode)
	}
}

func testEnv(t *testing.T, sb sandbox.Sandbox, dir string) {
	res := run(t, sb, sandbox.ExecRequest{Shell: `echo "$FOO|$EMPTY|"; test -d "$HOME" && test -w "$TMPDIR" && echo ok`, Env: map[string]string{"FOO": "bar baz", "EMPTY": ""}, Dir: dir})
	if string(res.Stdout) != "bar baz||\nok\n" {
		t.Errorf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	if _, err := sb.Exec(t.Context(), sandbox.ExecRequest{Shell: "true", Env: map[string]string{"A=B": "x"}}); err == nil {
		t.Error("env name with '=': no error")
	}
}

func testDir(t *testing.T, sb sandbox.Sandbox, dir string) {
	ctx := t.Context()
	if err := sb.WriteFile(ctx, dir+"/sub/x", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	res := run(t, sb, sandbox.ExecRequest{Shell: "ls; cd .. && ls", Dir: dir + "/sub"})
	if string(res.Stdout) != "x\nsub\n" {
		t.Errorf("ls in %s/sub: %q", dir, res.Stdout)
	}
	res = run(t, sb, sandbox.ExecRequest{Shell: "ls " + dir + "/sub"})
	if string(res.Stdout) != "x\n" {
		t.Errorf("ls from the root: %q", res.Stdout)
	}
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: "true", Dir: "../"}); !errors.Is(err, sandbox.ErrOutsideWorkspace) {
		t.Errorf("Dir ../: %v, want ErrOutsideWorkspace", err)
	}
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: "true", Dir: "/tmp"}); !errors.Is(err, sandbox.ErrOutsideWorkspace) {
		t.Errorf("Dir /tmp: %v, want ErrOutsideWorkspace", err)
	}
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: "true", Dir: dir + "/missing"}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Dir missing: %v, want ErrNotFound", err)
	}
}

func testTruncation(t *testing.T, sb sandbox.Sandbox, dir string) {
	res := run(t, sb, sandbox.ExecRequest{Shell: "yes abc | head -c 100000; yes e | head -c 50 >&2", MaxOutput: 100, Dir: dir})
	if len(res.Stdout) != 100 || !res.StdoutTruncated || string(res.Stdout[:8]) != "abc\nabc\n" {
		t.Errorf("stdout len %d truncated %v", len(res.Stdout), res.StdoutTruncated)
	}
	if len(res.Stderr) != 50 || res.StderrTruncated {
		t.Errorf("stderr len %d truncated %v", len(res.Stderr), res.StderrTruncated)
	}
	res = run(t, sb, sandbox.ExecRequest{Shell: "printf 12345", MaxOutput: 5, Dir: dir})
	if string(res.Stdout) != "12345" || res.StdoutTruncated {
		t.Errorf("exactly at the cap: %q truncated %v", res.Stdout, res.StdoutTruncated)
	}
}

func testTimeout(t *testing.T, sb sandbox.Sandbox, dir string) {
	start := time.Now()
	res := run(t, sb, sandbox.ExecRequest{Shell: "echo started; sleep 30; echo never", Timeout: 500 * time.Millisecond, Dir: dir})
	if !res.TimedOut || res.ExitCode != 137 || string(res.Stdout) != "started\n" {
		t.Errorf("timed out %v exit %d stdout %q", res.TimedOut, res.ExitCode, res.Stdout)
	}
	if el := time.Since(start); el > 20*time.Second {
		t.Errorf("returned after %v", el)
	}
	// The sandbox still works afterwards.
	if res := run(t, sb, sandbox.ExecRequest{Shell: "echo ok", Dir: dir}); string(res.Stdout) != "ok\n" {
		t.Errorf("after a timeout: %q", res.Stdout)
	}
}

func testMissingCommand(t *testing.T, sb sandbox.Sandbox, dir string) {
	if _, err := sb.Exec(t.Context(), sandbox.ExecRequest{Argv: []string{"rath-no-such-command"}, Dir: dir}); !errors.Is(err, sandbox.ErrCommandNotFound) {
		t.Errorf("missing argv[0]: %v, want ErrCommandNotFound", err)
	}
	res := run(t, sb, sandbox.ExecRequest{Shell: "rath-no-such-command", Dir: dir})
	if res.ExitCode != 127 {
		t.Errorf("missing command in a shell: exit %d, want 127", res.ExitCode)
	}
	if _, err := sb.Exec(t.Context(), sandbox.ExecRequest{}); err == nil {
		t.Error("empty request: no error")
	}
}

func testFiles(t *testing.T, sb sandbox.Sandbox, dir string) {
	ctx := t.Context()
	if err := sb.WriteFile(ctx, dir+"/b/c.txt", []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := sb.WriteFile(ctx, dir+"/a.txt", []byte("a"), 0); err != nil {
		t.Fatal(err)
	}
	data, err := sb.ReadFile(ctx, dir+"/b/c.txt", 0)
	if err != nil || string(data) != "hello" {
		t.Errorf("ReadFile: %q %v", data, err)
	}
	if _, err := sb.ReadFile(ctx, dir+"/b/c.txt", 4); !errors.Is(err, sandbox.ErrTooLarge) {
		t.Errorf("ReadFile over limit: %v, want ErrTooLarge", err)
	}
	fi, err := sb.Stat(ctx, dir+"/b/c.txt")
	if err != nil || fi.Size != 5 || fi.IsDir || fi.Name != "c.txt" || fi.Path != dir+"/b/c.txt" || fi.Mode.Perm() != 0o600 {
		t.Errorf("Stat: %+v %v", fi, err)
	}
	list, err := sb.List(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range list {
		names = append(names, e.Name)
	}
	if strings.Join(names, ",") != ".keep,a.txt,b" || !list[2].IsDir || list[1].Path != dir+"/a.txt" {
		t.Errorf("List: %+v", list)
	}
	for _, p := range []string{dir + "/nope", dir + "/nope/deeper"} {
		if _, err := sb.ReadFile(ctx, p, 0); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("ReadFile(%s): %v, want ErrNotFound", p, err)
		}
		if _, err := sb.Stat(ctx, p); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("Stat(%s): %v, want ErrNotFound", p, err)
		}
		if _, err := sb.List(ctx, p); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("List(%s): %v, want ErrNotFound", p, err)
		}
	}
	if _, err := sb.List(ctx, dir+"/a.txt"); err == nil || errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("List of a file: %v, want a not-a-directory error", err)
	}
	if _, err := sb.ReadFile(ctx, dir+"/b", 0); err == nil {
		t.Error("ReadFile of a directory: no error")
	}
	if err := sb.WriteFile(ctx, dir+"/a.txt", []byte("overwritten"), 0); err != nil {
		t.Fatal(err)
	}
	if data, _ := sb.ReadFile(ctx, dir+"/a.txt", 0); string(data) != "overwritten" {
		t.Errorf("after overwrite: %q", data)
	}
}

func testFilesAndCommands(t *testing.T, sb sandbox.Sandbox, dir string) {
	ctx := t.Context()
	if err := sb.WriteFile(ctx, dir+"/from-api.txt", []byte("api\n"), 0); err != nil {
		t.Fatal(err)
	}
	res := run(t, sb, sandbox.ExecRequest{Shell: "cat from-api.txt && mkdir -p made/by && printf cmd > made/by/cmd.txt && echo more >> from-api.txt", Dir: dir})
	if string(res.Stdout) != "api\n" || res.ExitCode != 0 {
		t.Fatalf("cat: %q %q exit %d", res.Stdout, res.Stderr, res.ExitCode)
	}
	data, err := sb.ReadFile(ctx, dir+"/made/by/cmd.txt", 0)
	if err != nil || string(data) != "cmd" {
		t.Errorf("file written by a command: %q %v", data, err)
	}
	data, err = sb.ReadFile(ctx, dir+"/from-api.txt", 0)
	if err != nil || string(data) != "api\nmore\n" {
		t.Errorf("file appended by a command: %q %v", data, err)
	}
	fi, err := sb.Stat(ctx, dir+"/made")
	if err != nil || !fi.IsDir {
		t.Errorf("Stat of a directory made by a command: %+v %v", fi, err)
	}
}

func testOutside(t *testing.T, sb sandbox.Sandbox, dir string) {
	ctx := t.Context()
	// Links made from inside the sandbox pointing out.
	res := run(t, sb, sandbox.ExecRequest{Shell: "ln -s /etc/passwd abs && ln -s ../../.. up && ln -s a.txt rel && echo x > a.txt", Dir: dir})
	if res.ExitCode != 0 {
		t.Fatalf("ln: %q", res.Stderr)
	}
	for _, p := range []string{"../x", dir + "/../../x", "/etc/passwd", dir + "/abs", dir + "/up", dir + "/up/etc/passwd"} {
		if _, err := sb.ReadFile(ctx, p, 0); !errors.Is(err, sandbox.ErrOutsideWorkspace) || !strings.Contains(err.Error(), strings.TrimPrefix(p, "/")) {
			t.Errorf("ReadFile(%s): %v, want ErrOutsideWorkspace naming it", p, err)
		}
		if _, err := sb.Stat(ctx, p); !errors.Is(err, sandbox.ErrOutsideWorkspace) {
			t.Errorf("Stat(%s): %v, want ErrOutsideWorkspace", p, err)
		}
		if _, err := sb.List(ctx, p); !errors.Is(err, sandbox.ErrOutsideWorkspace) {
			t.Errorf("List(%s): %v, want ErrOutsideWorkspace", p, err)
		}
		if err := sb.WriteFile(ctx, p, []byte("x"), 0); !errors.Is(err, sandbox.ErrOutsideWorkspace) {
			t.Errorf("WriteFile(%s): %v, want ErrOutsideWorkspace", p, err)
		}
	}
	if err := sb.WriteFile(ctx, dir+"/up/planted", []byte("x"), 0); !errors.Is(err, sandbox.ErrOutsideWorkspace) {
		t.Errorf("WriteFile through a link out: %v", err)
	}
	if data, err := sb.ReadFile(ctx, dir+"/rel", 0); err != nil || string(data) != "x\n" {
		t.Errorf("link inside: %q %v", data, err)
	}
	list, err := sb.List(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list {
		if e.Name == "abs" && e.Mode&fs.ModeSymlink == 0 {
			t.Errorf("List shows the link abs as %v, want a symlink", e.Mode)
		}
	}
}

func testExecutable(t *testing.T, sb sandbox.Sandbox, dir string) {
	if err := sb.WriteFile(t.Context(), dir+"/s.sh", []byte("#!/bin/sh\necho \"script $1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	res := run(t, sb, sandbox.ExecRequest{Argv: []string{"./s.sh", "arg"}, Dir: dir})
	if string(res.Stdout) != "script arg\n" || res.ExitCode != 0 {
		t.Errorf("./s.sh: %q %q exit %d", res.Stdout, res.Stderr, res.ExitCode)
	}
}

func testClosed(t *testing.T, open OpenFunc) {
	sb, _ := open(t)
	ctx := t.Context()
	if res := run(t, sb, sandbox.ExecRequest{Shell: "echo up"}); string(res.Stdout) != "up\n" {
		t.Fatalf("before close: %q", res.Stdout)
	}
	if err := sb.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := sb.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: "true"}); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("Exec after Close: %v, want ErrClosed", err)
	}
	if _, err := sb.ReadFile(ctx, "x", 0); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("ReadFile after Close: %v, want ErrClosed", err)
	}
	if err := sb.WriteFile(ctx, "x", nil, 0); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("WriteFile after Close: %v, want ErrClosed", err)
	}
	if _, err := sb.List(ctx, "."); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("List after Close: %v, want ErrClosed", err)
	}
	if _, err := sb.Stat(ctx, "."); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("Stat after Close: %v, want ErrClosed", err)
	}
}

// Dir returns a fresh directory, removed after the test, that a sandbox's
// non-root user can reach: t.TempDir's parent is private (0700), and a
// root worker's local backend runs commands as another user, who must be
// able to search every directory above the workspace (as an operator's
// workspace directory, under /tmp by default, is).
func Dir(t testing.TB) string {
	t.Helper()
	d := t.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return d
}
