// Package local is the "local" sandbox backend: commands run as processes on
// the worker host, in the workspace directory.
//
// Local is NOT an isolation boundary. A command sees the host's filesystem
// and network, and can do anything its user can; use the "docker" backend
// ([github.com/rath-run/rath/pkg/sandbox/docker]) for code you do not
// trust. What local does confine:
//
//   - The user. When the worker runs as root, commands run as
//     Config.User (default 65534:65534, nobody) with no supplementary
//     groups, and the workspace and the command's TMPDIR are handed to that
//     user; files the worker writes for the sandbox (WriteFile) are
//     chowned to it. So a command cannot read the worker's
//     /proc/<pid>/environ, mem or fd, signal it, or read files only root
//     may read (protect secret files with mode 0600 or 0400). The
//     workspace must be reachable by that user: a parent directory it
//     cannot search fails Open with an error naming the directory. When
//     the worker is not root, commands run as the worker's own user and
//     Config.User is ignored; the worker's environment and memory are then
//     kept out of reach only by the worker being non-dumpable and holding
//     no secrets in its environment block (internal/app.HideSecrets), and
//     files the worker can read are readable by commands too.
//   - File operations (ReadFile, WriteFile, List, Stat) resolve inside the
//     workspace only: absolute paths, ".." above the root and symlinks
//     pointing out fail with [sandbox.ErrOutsideWorkspace] naming the path
//     (enforced by [os.Root]). A command's working directory is checked the
//     same way. Commands themselves are not confined.
//   - Each command runs in its own process group. On timeout, cancellation
//     or Close the whole group is killed with SIGKILL, and whatever is left
//     of the group when the command exits is killed too, so a call's
//     processes do not outlive it (a process that calls setsid escapes this).
//   - stdout and stderr are capped per call and marked truncated.
//   - The environment is scrubbed to an allow-list: PATH, HOME (the
//     workspace), TMPDIR (a private directory removed on Close), LANG, LC_ALL,
//     TZ, plus Config.PassEnv, the spec's Env and the request's Env. Nothing
//     else of the worker's environment (API keys, database URLs) reaches a
//     command.
//
// Spec fields: Env is added to every command; TimeoutSeconds is the default
// per-call timeout; Image, Entrypoint, Network and WorkingDir are ignored
// (the workspace is the working directory).
package local

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rath-run/rath/pkg/sandbox"
	"github.com/rath-run/rath/pkg/sandbox/internal/capbuf"
	"github.com/rath-run/rath/pkg/sandbox/internal/hostfs"
	"github.com/rath-run/rath/pkg/session"
)

// Name is the backend's registry name.
const Name = "local"

// Defaults for a zero Config.
const (
	DefaultTimeout   = 60 * time.Second
	DefaultMaxOutput = 1 << 20
	defaultPath      = "/usr/local/bin:/usr/bin:/bin"
)

// Config configures the backend. The zero value is usable.
type Config struct {
	// Timeout is the per-call wall-clock limit when neither the request nor
	// the spec sets one. Default [DefaultTimeout].
	Timeout time.Duration
	// MaxOutput caps stdout and stderr each when the request does not.
	// Default [DefaultMaxOutput].
	MaxOutput int
	// Path is the PATH commands see. Default: the worker's PATH, or
	// /usr/local/bin:/usr/bin:/bin when it has none.
	Path string
	// PassEnv names further worker environment variables passed through to
	// commands. Empty by default; never list secrets here.
	PassEnv []string
	// User is the "uid:gid" commands run as when the worker runs as root.
	// Default [DefaultUser] (nobody); root ("0") is refused. Ignored when
	// the worker is not root (commands then run as the worker's user).
	User string
	// DiskQuotaBytes is the size limit of a sandbox's workspace while
	// commands run, which the worker's workspace manager enforces with a
	// size-limited tmpfs (see [sandbox.DiskQuota]). Default
	// [DefaultDiskQuota]; negative means no limit.
	DiskQuotaBytes int64
}

// DefaultUser is the user commands of a root worker run as: nobody.
const DefaultUser = "65534:65534"

// DefaultDiskQuota is the workspace size limit while commands run, the
// same as the snapshot limit (workspace.DefaultMaxTotalBytes).
const DefaultDiskQuota = 1 << 30

// Backend opens local sandboxes. Safe for concurrent use.
type Backend struct {
	cfg       Config
	languages []string
	// asUser is set when commands run as another user (a root worker).
	asUser   bool
	uid, gid int
	userErr  error // a bad Config.User, reported by Open
}

// New returns the backend.
func New(cfg Config) *Backend {
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	cfg.MaxOutput = cmp.Or(cfg.MaxOutput, DefaultMaxOutput)
	cfg.Path = cmp.Or(cfg.Path, os.Getenv("PATH"), defaultPath)
	cfg.User = cmp.Or(cfg.User, DefaultUser)
	cfg.DiskQuotaBytes = cmp.Or(cfg.DiskQuotaBytes, DefaultDiskQuota)
	b := &Backend{cfg: cfg, languages: []string{"sh"}}
	if os.Geteuid() == 0 {
		b.asUser = true
		b.uid, b.gid, b.userErr = parseUser(cfg.User)
	}
	if b.lookPath("python3", cfg.Path) != "" {
		b.languages = append([]string{"python"}, b.languages...)
	}
	return b
}

// parseUser parses "uid:gid" (or "uid", gid the same), refusing root.
func parseUser(u string) (int, int, error) {
	us, gs, ok := strings.Cut(u, ":")
	if !ok {
		gs = us
	}
	uid, err1 := strconv.Atoi(us)
	gid, err2 := strconv.Atoi(gs)
	if err1 != nil || err2 != nil || uid <= 0 || gid < 0 || uid > 1<<31-1 || gid > 1<<31-1 {
		return 0, 0, fmt.Errorf("local: Config.User %q: want a non-root numeric uid[:gid]", u)
	}
	return uid, gid, nil
}

// Check reports a bad Config.User (which Open would report too), so a
// worker can refuse it at startup.
func (b *Backend) Check() error { return b.userErr }

// DiskQuota implements [sandbox.DiskQuota].
func (b *Backend) DiskQuota() int64 { return max(b.cfg.DiskQuotaBytes, 0) }

// RunsAs reports the uid and gid commands run as, and whether that is
// another user than the worker's (a root worker).
func (b *Backend) RunsAs() (uid, gid int, other bool) {
	if !b.asUser {
		return os.Geteuid(), os.Getegid(), false
	}
	return b.uid, b.gid, true
}

// Name returns "local".
func (b *Backend) Name() string { return Name }

// Capabilities reports process isolation.
func (b *Backend) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{
		Isolation:   sandbox.IsolationProcess,
		ColdStart:   time.Millisecond,
		Languages:   slices.Clone(b.languages),
		Description: "a process on the worker host in the workspace directory; not an isolation boundary",
	}
}

// Open opens a sandbox over the existing directory dir.
func (b *Backend) Open(ctx context.Context, spec session.Spec, dir string) (sandbox.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for k := range spec.Env {
		if err := checkEnvName(k); err != nil {
			return nil, fmt.Errorf("local: spec env: %w", err)
		}
	}
	fsys, err := hostfs.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	fi, err := os.Stat(fsys.Dir())
	if err != nil || !fi.IsDir() {
		fsys.Close()
		return nil, fmt.Errorf("local: workspace %s is not a directory", dir)
	}
	if b.asUser {
		if err := b.handOver(fsys); err != nil {
			fsys.Close()
			return nil, err
		}
	}
	tmp, err := os.MkdirTemp("", "rath-local-tmp-")
	if err != nil {
		fsys.Close()
		return nil, fmt.Errorf("local: temp dir: %w", err)
	}
	if b.asUser {
		if err := os.Chown(tmp, b.uid, b.gid); err != nil {
			fsys.Close()
			_ = os.RemoveAll(tmp)
			return nil, fmt.Errorf("local: hand the temp dir to uid %d: %w", b.uid, err)
		}
	}
	timeout := b.cfg.Timeout
	if spec.TimeoutSeconds > 0 {
		timeout = time.Duration(spec.TimeoutSeconds * float64(time.Second))
	}
	s := &Sandbox{
		b:       b,
		fs:      fsys,
		tmp:     tmp,
		timeout: timeout,
		env:     b.baseEnv(fsys.Dir(), tmp, spec.Env),
		running: map[int]struct{}{},
	}
	s.Files = hostfs.NewFiles(fsys, s.check)
	return s, nil
}

func (b *Backend) baseEnv(home, tmp string, spec map[string]string) map[string]string {
	env := map[string]string{
		"PATH":   b.cfg.Path,
		"HOME":   home,
		"TMPDIR": tmp,
		"LANG":   cmp.Or(os.Getenv("LANG"), "C.UTF-8"),
	}
	for _, k := range append([]string{"LC_ALL", "TZ"}, b.cfg.PassEnv...) {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	for k, v := range spec {
		env[k] = v
	}
	return env
}

// handOver gives the workspace to the commands' user: it checks that the
// user can reach it, chowns the tree and makes WriteFile chown too.
func (b *Backend) handOver(fsys *hostfs.FS) error {
	if b.userErr != nil {
		return b.userErr
	}
	if err := searchable(filepath.Dir(fsys.Dir()), b.uid, b.gid); err != nil {
		return fmt.Errorf("local: workspace %s: %w", fsys.Dir(), err)
	}
	err := filepath.WalkDir(fsys.Dir(), func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, b.uid, b.gid)
	})
	if err != nil {
		return fmt.Errorf("local: hand the workspace to uid %d: %w", b.uid, err)
	}
	fsys.SetOwner(b.uid, b.gid)
	return nil
}

// searchable reports an error naming the first directory from dir up to
// the root that uid:gid (with no supplementary groups) may not search.
func searchable(dir string, uid, gid int) error {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if !permits(fi, uid, gid) {
			return fmt.Errorf("directory %s (mode %s) is not searchable by uid %d, whom commands run as: put workspaces under a directory it can reach (e.g. /tmp)", d, fi.Mode().Perm(), uid)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// permits reports whether uid:gid (no supplementary groups) may execute
// fi, or search it for a directory, by the owner, group and other
// classes, as the kernel checks it.
func permits(fi fs.FileInfo, uid, gid int) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	perm := fi.Mode().Perm()
	switch {
	case !ok:
		return true
	case int(st.Uid) == uid:
		return perm&0o100 != 0
	case int(st.Gid) == gid:
		return perm&0o010 != 0
	default:
		return perm&0o001 != 0
	}
}

// Sandbox is one open local sandbox.
type Sandbox struct {
	// Files gives ReadFile, WriteFile, List and Stat on the workspace,
	// each refused once the sandbox is closed.
	hostfs.Files

	b       *Backend
	fs      *hostfs.FS
	tmp     string
	timeout time.Duration
	env     map[string]string

	mu      sync.Mutex // guards following
	closed  bool
	running map[int]struct{} // process group ids
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

func (s *Sandbox) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("local: %w", sandbox.ErrClosed)
	}
	return nil
}

// Exec runs one command; see the package doc for what is confined.
func (s *Sandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if err := s.check(ctx); err != nil {
		return sandbox.ExecResult{}, err
	}
	argv, err := req.Command()
	if err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("local: %w", err)
	}
	dir, err := s.fs.HostDir(req.Dir)
	if err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("local: %w", err)
	}
	env := make(map[string]string, len(s.env)+len(req.Env))
	for k, v := range s.env {
		env[k] = v
	}
	for k, v := range req.Env {
		if err := checkEnvName(k); err != nil {
			return sandbox.ExecResult{}, fmt.Errorf("local: request env: %w", err)
		}
		env[k] = v
	}
	bin := argv[0]
	if !strings.Contains(bin, "/") {
		if bin = s.b.lookPath(bin, env["PATH"]); bin == "" {
			return sandbox.ExecResult{}, fmt.Errorf("local: %w: %q", sandbox.ErrCommandNotFound, argv[0])
		}
	}
	timeout := cmp.Or(req.Timeout, s.timeout)
	maxOut := cmp.Or(req.MaxOutput, s.b.cfg.MaxOutput)
	stdout, stderr := capbuf.New(maxOut), capbuf.New(maxOut)

	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, bin, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Dir = dir
	cmd.Env = envList(env)
	if len(req.Stdin) > 0 {
		cmd.Stdin = bytes.NewReader(req.Stdin)
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if s.b.asUser {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(s.b.uid), Gid: uint32(s.b.gid), Groups: []uint32{}}
	}
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	// After the command exits (or is killed), stop waiting for pipes held
	// open by descendants that left the group.
	cmd.WaitDelay = 500 * time.Millisecond

	start := time.Now()
	if err := cmd.Start(); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return sandbox.ExecResult{}, fmt.Errorf("local: %w: %q", sandbox.ErrCommandNotFound, argv[0])
		}
		return sandbox.ExecResult{}, fmt.Errorf("local: start %q: %w", argv[0], err)
	}
	pgid := cmd.Process.Pid
	s.mu.Lock()
	if s.closed {
		// Close ran between the check above and the start: it could not
		// see this command, so kill it here.
		_ = killGroup(pgid)
	} else {
		s.running[pgid] = struct{}{}
	}
	s.mu.Unlock()
	waitErr := cmd.Wait()
	// Background processes of the command do not outlive the call.
	_ = killGroup(pgid)
	s.mu.Lock()
	delete(s.running, pgid)
	s.mu.Unlock()

	res := sandbox.ExecResult{Elapsed: time.Since(start), ExitCode: exitCode(cmd.ProcessState)}
	res.Stdout, res.StdoutTruncated = stdout.Bytes()
	res.Stderr, res.StderrTruncated = stderr.Bytes()
	if ctx.Err() != nil {
		return res, fmt.Errorf("local: exec %q: %w", argv[0], ctx.Err())
	}
	if errors.Is(cctx.Err(), context.DeadlineExceeded) {
		res.TimedOut = true
	}
	var ee *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &ee) && !errors.Is(waitErr, exec.ErrWaitDelay) {
		return res, fmt.Errorf("local: exec %q: %w", argv[0], waitErr)
	}
	return res, nil
}

// exitCode is the process's exit status, or 128+signal when a signal killed
// it, as a shell reports it.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func killGroup(pgid int) error {
	err := syscall.Kill(-pgid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// Close kills running commands and removes the sandbox's TMPDIR. The
// workspace directory stays. Idempotent.
func (s *Sandbox) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for pgid := range s.running {
		_ = killGroup(pgid)
	}
	s.mu.Unlock()
	return errors.Join(s.fs.Close(), os.RemoveAll(s.tmp))
}

func checkEnvName(k string) error {
	if k == "" || strings.ContainsAny(k, "=\x00") {
		return fmt.Errorf("invalid variable name %q", k)
	}
	return nil
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// lookPath finds an executable in path (relative entries are skipped so a
// workspace file never shadows a system command) that the commands' user
// may run: one under a directory it cannot search (root's pyenv shims in
// /root) is not found rather than failing to start.
func (b *Backend) lookPath(name, path string) string {
	for dir := range strings.SplitSeq(path, ":") {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
			continue
		}
		if b.asUser && (!permits(fi, b.uid, b.gid) || searchable(dir, b.uid, b.gid) != nil) {
			continue
		}
		return p
	}
	return ""
}
