package local_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rath-run/rath/pkg/sandbox"
	"github.com/rath-run/rath/pkg/sandbox/local"
	"github.com/rath-run/rath/pkg/sandbox/sandboxtest"
	"github.com/rath-run/rath/pkg/session"
)

// TestCommandsRunAsAnotherUser: under a root worker a command runs as
// Config.User with no supplementary groups, cannot read the worker's
// /proc/<pid>/environ or fd, nor a root-only file, and owns the workspace,
// TMPDIR and the files the worker writes for it. Under a non-root worker
// it runs as the worker's user.
func TestCommandsRunAsAnotherUser(t *testing.T) {
	t.Parallel()
	secret := filepath.Join(sandboxtest.Dir(t), "secret")
	if err := os.WriteFile(secret, []byte("root-only-6a1e"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := local.New(local.Config{User: "65533:65532"})
	uid, gid, other := b.RunsAs()
	if other != (os.Geteuid() == 0) {
		t.Fatalf("RunsAs other = %v for euid %d", other, os.Geteuid())
	}
	dir := sandboxtest.Dir(t)
	sb, err := b.Open(t.Context(), session.Spec{}, dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = sb.Close(t.Context()) })
	if err := sb.WriteFile(t.Context(), "sub/from-worker.txt", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(os.Getpid())
	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Shell: `id -u; id -g; id -G; echo made > mine; echo t > "$TMPDIR/t" && echo tmp-ok; ` +
		`cat /proc/` + pid + `/environ >/dev/null 2>&1 || echo environ-denied; ls /proc/` + pid + `/fd >/dev/null 2>&1 || echo fd-denied; ` +
		`cat ` + secret + ` 2>/dev/null || echo secret-denied; echo more >> sub/from-worker.txt && echo append-ok`})
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	out := string(res.Stdout)
	want := []string{strconv.Itoa(uid), strconv.Itoa(gid), strconv.Itoa(gid), "tmp-ok", "append-ok"}
	if other {
		want = append(want, "environ-denied", "fd-denied", "secret-denied")
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 3 || lines[0] != want[0] || lines[1] != want[1] || lines[2] != want[2] {
		t.Fatalf("id: %q, want uid %d gid %d and no other groups", out, uid, gid)
	}
	for _, w := range want[3:] {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s%s", w, out, res.Stderr)
		}
	}
	for _, p := range []string{dir, filepath.Join(dir, "mine"), filepath.Join(dir, "sub", "from-worker.txt")} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != uid {
			t.Errorf("%s is owned by uid %d, want %d", p, st.Uid, uid)
		}
	}
}

// TestUserRefused: root and malformed users are refused (at Check and
// Open, when the worker is root), and a workspace the user cannot reach
// fails Open naming the directory.
func TestUserRefused(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		if err := local.New(local.Config{User: "0"}).Check(); err != nil {
			t.Fatalf("non-root worker: Config.User is ignored, got %v", err)
		}
		return
	}
	for _, u := range []string{"0", "0:0", "nobody", "-1", "65534:x"} {
		b := local.New(local.Config{User: u})
		if err := b.Check(); err == nil || !strings.Contains(err.Error(), "Config.User") {
			t.Errorf("User %q: Check = %v, want an error naming Config.User", u, err)
		}
		if _, err := b.Open(t.Context(), session.Spec{}, sandboxtest.Dir(t)); err == nil {
			t.Errorf("User %q: Open succeeded", u)
		}
	}
	private := filepath.Join(sandboxtest.Dir(t), "private")
	ws := filepath.Join(private, "ws")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := local.New(local.Config{}).Open(t.Context(), session.Spec{}, ws)
	if err == nil || !strings.Contains(err.Error(), "directory "+private+" (mode -rwx------) is not searchable by uid 65534") {
		t.Fatalf("unreachable workspace: %v, want an error naming %s", err, private)
	}
}
