// Package docker is the "docker" sandbox backend: a hardened container per
// sandbox, through the Docker Engine API (github.com/moby/moby/client). It is
// the backend that isolates tools from the worker host.
//
// # Container
//
// A sandbox's container is created on its first Exec and reused by later
// calls; Close removes it, and a sandbox idle for Config.IdleTimeout has its
// container removed (the next call creates a fresh one over the same
// workspace). Every container is labeled rath.sandbox=1. Hardening, all by
// default:
//
//   - network mode "none" unless the spec's Network is "egress", which
//     joins Config.EgressNetwork (the operator's choice; [NoEgress] refuses
//     it); any other name ("bridge", "host", "container:…", a user-defined
//     network) is refused: a spec never names a Docker network;
//   - all capabilities dropped, no-new-privileges, the default seccomp
//     profile, a private IPC namespace, an init process reaping orphans;
//   - a read-only root filesystem; the workspace bind-mounted writable at
//     /workspace, size-limited by Config.DiskQuotaBytes where the worker
//     can mount (see [sandbox.DiskQuota]); /tmp a small tmpfs (nosuid,
//     nodev, noexec);
//   - pids, memory (no swap) and CPU limits;
//   - a non-root user: Config.User, else the workspace directory's owner,
//     else (a root-owned workspace) 65534:65534 — a root worker then chowns
//     the workspace to that user so the container can write it.
//
// # Exec
//
// Commands run through the exec API with stdout and stderr demultiplexed
// (stdcopy), stdin attached when given, each stream capped. Each command is
// started by a one-line /bin/sh wrapper (so images must have /bin/sh) that
// reports its process id — a docker exec process leads its own process
// group — and then execs the command. On the wall-clock timeout, or when the
// caller's context ends, a second exec kills that process group with
// SIGKILL; if the kill cannot run (a fork bomb exhausted the pids limit) the
// container itself is removed and recreated on next use. A command the
// container cannot find fails with [sandbox.ErrCommandNotFound], as on the
// local backend.
//
// # Files
//
// ReadFile, WriteFile, List and Stat work on the bind-mounted workspace from
// the host side, confined by os.Root exactly as on the local backend: they
// need no container (no cold start for a file read), cost a syscall instead
// of an API round trip with a tar stream, and behave identically on both
// backends. This requires the Engine to run on the worker's host (a local
// socket), which bind mounts require anyway.
package docker

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/rath-run/rath/pkg/sandbox"
	"github.com/rath-run/rath/pkg/sandbox/internal/capbuf"
	"github.com/rath-run/rath/pkg/sandbox/internal/hostfs"
	"github.com/rath-run/rath/pkg/session"
)

// Name is the backend's registry name.
const Name = "docker"

// Label marks every sandbox container.
const Label = "rath.sandbox"

// NoEgress as Config.EgressNetwork grants no egress network: a spec asking
// for "egress" is refused.
const NoEgress = "none"

// Defaults for a zero Config.
const (
	DefaultImage       = "rath-sandbox:busybox"
	DefaultMemory      = 256 << 20
	DefaultPidsLimit   = 128
	DefaultNanoCPUs    = 1_000_000_000
	DefaultTmpSize     = 64 << 20
	DefaultTimeout     = 60 * time.Second
	DefaultMaxOutput   = 1 << 20
	DefaultIdleTimeout = 5 * time.Minute
	workspaceMount     = "/workspace"
	nobody             = "65534:65534"
)

// DefaultDiskQuota is the workspace limit while commands run, the same as
// the snapshot limit (workspace.DefaultMaxTotalBytes).
const DefaultDiskQuota = 1 << 30

// Config configures the backend. Zero fields take the defaults above.
type Config struct {
	// Image when the spec names none. Default [DefaultImage], which
	// scripts/sandbox-image.sh builds locally.
	Image string
	// Memory limit in bytes (swap disabled). Default 256 MiB.
	Memory int64
	// PidsLimit caps processes in the container. Default 128.
	PidsLimit int64
	// NanoCPUs caps CPU (1e9 = one CPU). Default one CPU.
	NanoCPUs int64
	// TmpSize is the /tmp tmpfs size in bytes. Default 64 MiB.
	TmpSize int64
	// Timeout is the per-call wall-clock limit when neither the request nor
	// the spec sets one. Default 60 s.
	Timeout time.Duration
	// MaxOutput caps stdout and stderr each when the request does not.
	// Default 1 MiB.
	MaxOutput int
	// IdleTimeout removes a sandbox's container after this long without a
	// call. Default 5 minutes; negative disables the reaper.
	IdleTimeout time.Duration
	// User ("uid:gid") commands run as. Default: the workspace owner, or
	// 65534:65534 for a root-owned workspace. Root ("0") is refused.
	User string
	// SeccompProfile, when set, is a seccomp profile (JSON) replacing the
	// Engine's default, e.g. to refuse ptrace, which the default profile
	// allows between the sandbox's own processes. Default: the Engine's.
	SeccompProfile string
	// DiskQuotaBytes is the size limit of a sandbox's workspace while
	// commands run, which the worker's workspace manager enforces with a
	// size-limited tmpfs under the bind mount (see [sandbox.DiskQuota]):
	// this Engine's storage driver (fuse-overlayfs, overlay2 without
	// project quotas) cannot limit a bind mount. Default
	// [DefaultDiskQuota]; negative means no limit.
	DiskQuotaBytes int64
	// EgressNetwork is the Docker network for specs asking for "egress";
	// [NoEgress] refuses them. Default "bridge". A spec never names a
	// network itself.
	EgressNetwork string
	// Client is the Engine client. Default client.New(client.FromEnv).
	Client *client.Client
	// Logger receives container lifecycle events. Default: discard.
	Logger *slog.Logger
}

// Backend opens docker sandboxes. Safe for concurrent use.
type Backend struct {
	cfg      Config
	cli      *client.Client
	ownsCli  bool
	instance string // labels this backend's containers
	owner    string // host:pid of the process that created them
}

// New returns the backend. It does not contact the Engine; see [Backend.Ping].
func New(cfg Config) (*Backend, error) {
	cfg.Image = cmp.Or(cfg.Image, DefaultImage)
	cfg.Memory = cmp.Or(cfg.Memory, DefaultMemory)
	cfg.PidsLimit = cmp.Or(cfg.PidsLimit, DefaultPidsLimit)
	cfg.NanoCPUs = cmp.Or(cfg.NanoCPUs, DefaultNanoCPUs)
	cfg.TmpSize = cmp.Or(cfg.TmpSize, DefaultTmpSize)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	cfg.MaxOutput = cmp.Or(cfg.MaxOutput, DefaultMaxOutput)
	cfg.IdleTimeout = cmp.Or(cfg.IdleTimeout, DefaultIdleTimeout)
	cfg.EgressNetwork = cmp.Or(cfg.EgressNetwork, "bridge")
	cfg.DiskQuotaBytes = cmp.Or(cfg.DiskQuotaBytes, DefaultDiskQuota)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.User != "" {
		if err := checkUser(cfg.User); err != nil {
			return nil, fmt.Errorf("docker: config user: %w", err)
		}
	}
	b := &Backend{cfg: cfg, cli: cfg.Client}
	if b.cli == nil {
		cli, err := client.New(client.FromEnv)
		if err != nil {
			return nil, fmt.Errorf("docker: engine client: %w", err)
		}
		b.cli, b.ownsCli = cli, true
	}
	var id [6]byte
	_, _ = rand.Read(id[:])
	b.instance = hex.EncodeToString(id[:])
	host, _ := os.Hostname()
	b.owner = host + ":" + strconv.Itoa(os.Getpid())
	return b, nil
}

// RemoveOrphans removes sandbox containers whose creating process ran on
// this host and is gone (a crashed worker's or test's leftovers), and
// returns how many it removed. Containers of live processes, and of other
// hosts, are left alone. Workers may call it at start.
func (b *Backend) RemoveOrphans(ctx context.Context) (int, error) {
	res, err := b.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", Label+"=1")})
	if err != nil {
		return 0, fmt.Errorf("docker: list sandbox containers: %w", err)
	}
	host, _ := os.Hostname()
	n := 0
	for _, c := range res.Items {
		h, p, ok := strings.Cut(c.Labels[Label+".owner"], ":")
		pid, err := strconv.Atoi(p)
		if !ok || err != nil || h != host || pid <= 0 || processAlive(pid) {
			continue
		}
		if _, err := b.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return n, fmt.Errorf("docker: remove orphan %s: %w", short(c.ID), err)
		}
		n++
	}
	return n, nil
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Ping checks that the Engine answers and negotiates the API version.
func (b *Backend) Ping(ctx context.Context) error {
	if _, err := b.cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return fmt.Errorf("docker: engine unreachable: %w", err)
	}
	return nil
}

// Close releases the Engine client when the backend made it. Sandboxes
// should be closed first.
func (b *Backend) Close() error {
	if b.ownsCli {
		return b.cli.Close()
	}
	return nil
}

// DiskQuota implements [sandbox.DiskQuota].
func (b *Backend) DiskQuota() int64 { return max(b.cfg.DiskQuotaBytes, 0) }

// Name returns "docker".
func (b *Backend) Name() string { return Name }

// Capabilities reports container isolation.
func (b *Backend) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{
		Isolation:   sandbox.IsolationContainer,
		ColdStart:   500 * time.Millisecond,
		Languages:   []string{"sh"},
		Description: "a hardened container per sandbox (no network, no capabilities, read-only root, non-root, limits)",
	}
}

// Open opens a sandbox over the existing directory dir. The container is
// created on first use.
func (b *Backend) Open(ctx context.Context, spec session.Spec, dir string) (sandbox.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	network, err := b.network(spec.Network)
	if err != nil {
		return nil, err
	}
	for k := range spec.Env {
		if err := checkEnvName(k); err != nil {
			return nil, fmt.Errorf("docker: spec env: %w", err)
		}
	}
	fsys, err := hostfs.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	user, err := b.user(fsys)
	if err != nil {
		fsys.Close()
		return nil, err
	}
	timeout := b.cfg.Timeout
	if spec.TimeoutSeconds > 0 {
		timeout = time.Duration(spec.TimeoutSeconds * float64(time.Second))
	}
	s := &Sandbox{
		b:       b,
		fs:      fsys,
		spec:    spec,
		image:   cmp.Or(spec.Image, b.cfg.Image),
		network: network,
		user:    user,
		timeout: timeout,
	}
	s.Files = hostfs.NewFiles(fsys, s.check)
	return s, nil
}

func (b *Backend) network(n string) (string, error) {
	switch n {
	case "", "none":
		return "none", nil
	case "egress":
		if b.cfg.EgressNetwork == NoEgress {
			return "", errors.New("docker: spec network \"egress\" is refused: the operator grants no egress network")
		}
		return b.cfg.EgressNetwork, nil
	default:
		// A spec is tenant input: it never names a Docker network (another
		// tenant's, a host-only service's, the host's).
		return "", fmt.Errorf("docker: spec network %q is refused: a spec may ask for \"none\" or \"egress\", never name a Docker network", n)
	}
}

// user picks the uid:gid commands run as and, for a root worker over a
// root-owned workspace, hands the workspace to that user.
func (b *Backend) user(fsys *hostfs.FS) (string, error) {
	if b.cfg.User != "" {
		return b.cfg.User, nil
	}
	fi, err := os.Stat(fsys.Dir())
	if err != nil {
		return "", fmt.Errorf("docker: workspace: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.IsDir() {
		return "", fmt.Errorf("docker: workspace %s is not a directory", fsys.Dir())
	}
	if st.Uid != 0 {
		return fmt.Sprintf("%d:%d", st.Uid, st.Gid), nil
	}
	if os.Geteuid() == 0 {
		if err := chownTree(fsys.Dir(), 65534, 65534); err != nil {
			return "", fmt.Errorf("docker: hand the workspace to uid 65534: %w", err)
		}
		fsys.SetOwner(65534, 65534)
	}
	return nobody, nil
}

func chownTree(dir string, uid, gid int) error {
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

func checkUser(u string) error {
	uid, _, _ := strings.Cut(u, ":")
	if n, err := strconv.Atoi(uid); err != nil || n <= 0 {
		return fmt.Errorf("user %q: want a non-root numeric uid[:gid]", u)
	}
	return nil
}

// Sandbox is one docker sandbox.
type Sandbox struct {
	// Files gives ReadFile, WriteFile, List and Stat on the workspace,
	// each refused once the sandbox is closed.
	hostfs.Files

	b       *Backend
	fs      *hostfs.FS
	spec    session.Spec
	image   string
	network string
	user    string
	timeout time.Duration

	mu       sync.Mutex // guards following
	closed   bool
	id       string // container id; "" until first use or after reaping
	inflight int
	idle     *time.Timer
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

// ContainerID returns the sandbox's current container id, "" when none is
// running. For inspection and tests.
func (s *Sandbox) ContainerID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// acquire returns the container id, creating and starting the container if
// needed, and counts the call in flight until release.
func (s *Sandbox) acquire(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", fmt.Errorf("docker: %w", sandbox.ErrClosed)
	}
	if s.idle != nil {
		s.idle.Stop()
	}
	if s.id == "" {
		id, err := s.create(ctx)
		if err != nil {
			return "", err
		}
		s.id = id
	}
	s.inflight++
	return s.id, nil
}

func (s *Sandbox) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight--
	if s.inflight == 0 && !s.closed && s.id != "" && s.b.cfg.IdleTimeout > 0 {
		if s.idle == nil {
			s.idle = time.AfterFunc(s.b.cfg.IdleTimeout, s.reap)
		} else {
			s.idle.Reset(s.b.cfg.IdleTimeout)
		}
	}
}

// reap removes an idle container.
func (s *Sandbox) reap() {
	s.mu.Lock()
	if s.closed || s.inflight > 0 || s.id == "" {
		s.mu.Unlock()
		return
	}
	id := s.id
	s.id = ""
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.b.cfg.Logger.Info("docker sandbox idle; removing container", slog.String("container", short(id)))
	s.remove(ctx, id)
}

// drop forgets a container that must not be reused (its kill failed) and
// removes it.
func (s *Sandbox) drop(ctx context.Context, id string) {
	s.mu.Lock()
	if s.id == id {
		s.id = ""
	}
	s.mu.Unlock()
	s.remove(ctx, id)
}

func (s *Sandbox) remove(ctx context.Context, id string) {
	_, err := s.b.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		s.b.cfg.Logger.Warn("docker sandbox: remove container", slog.String("container", short(id)), slog.String("error", err.Error()))
	}
}

func (s *Sandbox) create(ctx context.Context) (string, error) {
	b := s.b
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + workspaceMount,
		"TMPDIR=/tmp",
		"LANG=C.UTF-8",
	}
	env = append(env, envList(s.spec.Env)...)
	keepAlive := s.spec.Entrypoint
	if len(keepAlive) == 0 {
		keepAlive = []string{"/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done"}
	}
	pids := b.cfg.PidsLimit
	init := true
	secOpts := []string{"no-new-privileges"}
	if b.cfg.SeccompProfile != "" {
		secOpts = append(secOpts, "seccomp="+b.cfg.SeccompProfile)
	}
	hc := &container.HostConfig{
		NetworkMode:    container.NetworkMode(s.network),
		CapDrop:        []string{"ALL"},
		SecurityOpt:    secOpts,
		ReadonlyRootfs: true,
		IpcMode:        "private",
		Init:           &init,
		Mounts: []mount.Mount{{
			Type:   mount.TypeBind,
			Source: s.fs.Dir(),
			Target: workspaceMount,
		}},
		Tmpfs: map[string]string{
			"/tmp": fmt.Sprintf("rw,nosuid,nodev,noexec,size=%d,mode=1777", b.cfg.TmpSize),
		},
		Resources: container.Resources{
			Memory:     b.cfg.Memory,
			MemorySwap: b.cfg.Memory,
			NanoCPUs:   b.cfg.NanoCPUs,
			PidsLimit:  &pids,
		},
	}
	cfg := &container.Config{
		Image:      s.image,
		User:       s.user,
		Env:        env,
		WorkingDir: workspaceMount,
		Entrypoint: keepAlive,
		Labels: map[string]string{
			Label:                "1",
			Label + ".backend":   b.instance,
			Label + ".owner":     b.owner,
			Label + ".workspace": s.fs.Dir(),
		},
	}
	start := time.Now()
	res, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Config: cfg, HostConfig: hc})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return "", fmt.Errorf("docker: image %q not found (build the default with scripts/sandbox-image.sh): %w", s.image, err)
		}
		return "", fmt.Errorf("docker: create container: %w", err)
	}
	if _, err := b.cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		s.remove(context.WithoutCancel(ctx), res.ID)
		return "", fmt.Errorf("docker: start container: %w", err)
	}
	b.cfg.Logger.Info("docker sandbox container started", slog.String("container", short(res.ID)),
		slog.String("image", s.image), slog.Duration("elapsed", time.Since(start)))
	return res.ID, nil
}

// wrapper runs every command. It reports its pid on the first stderr line
// (a docker exec process leads its own process group, so the pid names the
// group a timeout kills), refuses a command that does not exist, runs the
// command, reports its exit status on a stderr trailer tagged with a
// per-call nonce ($0), and kills what is left of its process group, so a
// command's background processes do not outlive the call (as on local).
const (
	wrapper     = `echo $$ >&2; command -v -- "$1" >/dev/null 2>&1 || { echo "rath-exec: not found" >&2; exit 127; }; "$@"; echo "$0:$?" >&2; kill -KILL 0`
	notFoundMsg = "rath-exec: not found\n"
)

// Exec runs one command in the container; see the package doc.
func (s *Sandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if err := s.check(ctx); err != nil {
		return sandbox.ExecResult{}, err
	}
	argv, err := req.Command()
	if err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("docker: %w", err)
	}
	dir, err := hostfs.Clean(req.Dir)
	if err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("docker: %w", err)
	}
	if _, err := s.fs.HostDir(dir); err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("docker: %w", err)
	}
	for k := range req.Env {
		if err := checkEnvName(k); err != nil {
			return sandbox.ExecResult{}, fmt.Errorf("docker: request env: %w", err)
		}
	}
	id, err := s.acquire(ctx)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	defer s.release()

	timeout := cmp.Or(req.Timeout, s.timeout)
	maxOut := cmp.Or(req.MaxOutput, s.b.cfg.MaxOutput)
	start := time.Now()
	nonce := newNonce()
	ex, err := s.b.cli.ExecCreate(ctx, id, client.ExecCreateOptions{
		User:         s.user,
		Env:          envList(req.Env),
		WorkingDir:   path.Join(workspaceMount, dir),
		Cmd:          append([]string{"/bin/sh", "-c", wrapper, nonce}, argv...),
		AttachStdin:  len(req.Stdin) > 0,
		AttachStdout: true,
		AttachStderr: true,
	})
	if err != nil {
		if cerrdefs.IsNotFound(err) || cerrdefs.IsConflict(err) {
			s.drop(context.WithoutCancel(ctx), id) // gone or stopped: recreate next time
		}
		return sandbox.ExecResult{}, fmt.Errorf("docker: exec create: %w", err)
	}
	// The stream must outlive a canceled ctx until the kill lands.
	att, err := s.b.cli.ExecAttach(context.WithoutCancel(ctx), ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("docker: exec attach: %w", err)
	}
	defer att.Close()

	stdout, stderr := capbuf.New(maxOut), capbuf.New(maxOut)
	trailer := &trailerWriter{next: stderr, marker: []byte(nonce + ":")}
	pidw := &pidWriter{next: trailer, got: make(chan struct{})}
	var wg sync.WaitGroup
	if len(req.Stdin) > 0 {
		wg.Go(func() {
			_, _ = io.Copy(att.Conn, bytes.NewReader(req.Stdin))
			_ = att.CloseWrite()
		})
	}
	copied := make(chan error, 1)
	wg.Go(func() {
		_, err := stdcopy.StdCopy(stdout, pidw, att.Reader)
		copied <- err
	})

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var timedOut bool
	var copyErr error
	select {
	case copyErr = <-copied:
	case <-timer.C:
		timedOut = true
	case <-ctx.Done():
	}
	if timedOut || (ctx.Err() != nil && copyErr == nil) {
		s.kill(context.WithoutCancel(ctx), id, pidw)
		select {
		case copyErr = <-copied:
		case <-time.After(10 * time.Second):
			att.Close() // the stream did not end: unblock the copy
			copyErr = <-copied
		}
	}
	att.Close()
	wg.Wait()
	trailer.flush()

	res := sandbox.ExecResult{TimedOut: timedOut}
	res.Stdout, res.StdoutTruncated = stdout.Bytes()
	res.Stderr, res.StderrTruncated = stderr.Bytes()
	insp, err := s.b.cli.ExecInspect(context.WithoutCancel(ctx), ex.ID, client.ExecInspectOptions{})
	res.Elapsed = time.Since(start)
	if err != nil && !timedOut { // a timeout may have removed the container
		return res, fmt.Errorf("docker: exec inspect: %w", err)
	}
	res.ExitCode = insp.ExitCode
	switch {
	case timedOut:
		res.ExitCode = 128 + int(syscall.SIGKILL)
	case trailer.found:
		res.ExitCode = trailer.code
	}
	if ctx.Err() != nil && !timedOut {
		return res, fmt.Errorf("docker: exec %q: %w", argv[0], ctx.Err())
	}
	if copyErr != nil && !timedOut {
		return res, fmt.Errorf("docker: exec %q: read output: %w", argv[0], copyErr)
	}
	if res.ExitCode == 127 && string(res.Stderr) == notFoundMsg && !res.StderrTruncated {
		return sandbox.ExecResult{}, fmt.Errorf("docker: %w: %q", sandbox.ErrCommandNotFound, argv[0])
	}
	return res, nil
}

// kill SIGKILLs the command's process group through a second exec. When
// that cannot run (no pid yet, pids limit exhausted), the container is
// removed; the next call creates a fresh one.
func (s *Sandbox) kill(ctx context.Context, id string, pidw *pidWriter) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	select {
	case <-pidw.got:
	case <-time.After(2 * time.Second):
	}
	pid := pidw.pid()
	if pid > 1 {
		res, err := s.runQuiet(ctx, id, []string{"/bin/sh", "-c", "kill -KILL -" + strconv.Itoa(pid)})
		if err == nil && res == 0 {
			return
		}
		s.b.cfg.Logger.Warn("docker sandbox: kill by exec failed; removing the container",
			slog.String("container", short(id)), slog.Int("pid", pid), slog.Any("error", err), slog.Int("exit", res))
	}
	s.drop(ctx, id)
}

// runQuiet runs a short command, discarding output, and returns its exit code.
func (s *Sandbox) runQuiet(ctx context.Context, id string, cmd []string) (int, error) {
	ex, err := s.b.cli.ExecCreate(ctx, id, client.ExecCreateOptions{User: s.user, Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return -1, err
	}
	att, err := s.b.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return -1, err
	}
	_, err = stdcopy.StdCopy(io.Discard, io.Discard, att.Reader)
	att.Close()
	if err != nil {
		return -1, err
	}
	insp, err := s.b.cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
	if err != nil {
		return -1, err
	}
	return insp.ExitCode, nil
}

func newNonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "rath-exit-" + hex.EncodeToString(b[:])
}

// trailerWriter passes stderr on, taking out the wrapper's exit trailer
// "<nonce>:<status>\n" wherever it appears (a straggler may write after
// it). Not safe for concurrent use; stdcopy writes from one goroutine.
type trailerWriter struct {
	next   io.Writer
	marker []byte
	pend   []byte
	found  bool
	code   int
}

func (w *trailerWriter) Write(p []byte) (int, error) {
	w.pend = append(w.pend, p...)
	for {
		i := bytes.Index(w.pend, w.marker)
		if i < 0 {
			break
		}
		rest := w.pend[i+len(w.marker):]
		j := bytes.IndexByte(rest, '\n')
		if j < 0 {
			if len(rest) <= 4 { // "255" at most, then the newline: wait for it
				w.forward(w.pend[:i])
				w.pend = append(w.pend[:0], w.pend[i:]...)
				return len(p), nil
			}
			j = -1
		}
		code, err := strconv.Atoi(string(rest[:max(j, 0)]))
		if j < 0 || err != nil {
			// Not a trailer after all: pass the marker's first byte on.
			w.forward(w.pend[:i+1])
			w.pend = append(w.pend[:0], w.pend[i+1:]...)
			continue
		}
		w.found, w.code = true, code
		w.forward(w.pend[:i])
		w.pend = append(w.pend[:0], rest[j+1:]...)
	}
	// Keep a tail that could be the start of a marker.
	if keep := len(w.marker) - 1; len(w.pend) > keep {
		w.forward(w.pend[:len(w.pend)-keep])
		w.pend = append(w.pend[:0], w.pend[len(w.pend)-keep:]...)
	}
	return len(p), nil
}

func (w *trailerWriter) forward(b []byte) {
	if len(b) > 0 {
		_, _ = w.next.Write(b)
	}
}

func (w *trailerWriter) flush() {
	w.forward(w.pend)
	w.pend = nil
}

// pidWriter takes the wrapper's first stderr line (the pid) and passes the
// rest on.
type pidWriter struct {
	next    io.Writer
	got     chan struct{}
	mu      sync.Mutex // guards following
	line    []byte
	done    bool
	pidSeen int
}

func (w *pidWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	if w.done {
		w.mu.Unlock()
		return w.next.Write(p)
	}
	n := len(p)
	i := bytes.IndexByte(p, '\n')
	if i < 0 {
		if len(w.line)+len(p) > 32 { // not a pid line: pass everything on
			w.done = true
			rest := append(slices.Clip(w.line), p...)
			w.mu.Unlock()
			close(w.got)
			_, _ = w.next.Write(rest)
			return n, nil
		}
		w.line = append(w.line, p...)
		w.mu.Unlock()
		return n, nil
	}
	w.line = append(w.line, p[:i]...)
	w.pidSeen, _ = strconv.Atoi(strings.TrimSpace(string(w.line)))
	w.done = true
	w.mu.Unlock()
	close(w.got)
	if len(p) > i+1 {
		_, _ = w.next.Write(p[i+1:])
	}
	return n, nil
}

func (w *pidWriter) pid() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pidSeen
}

func (s *Sandbox) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("docker: %w", sandbox.ErrClosed)
	}
	return nil
}

// Close removes the container (killing whatever runs in it). The workspace
// directory stays. Idempotent.
func (s *Sandbox) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	if s.idle != nil {
		s.idle.Stop()
	}
	id := s.id
	s.id = ""
	s.mu.Unlock()
	var err error
	if id != "" {
		_, err = s.b.cli.ContainerRemove(context.WithoutCancel(ctx), id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			err = fmt.Errorf("docker: remove container %s: %w", short(id), err)
		} else {
			err = nil
		}
	}
	return errors.Join(err, s.fs.Close())
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

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
