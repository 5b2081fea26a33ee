// Package app assembles Rath's processes from their parts: the coordinator
// and worker binaries, and the single-process `rathctl dev` stack. Only
// cmd/ and the CLI call it; it reads no environment itself (callers pass
// Getenv).
package app

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/worker"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/memory"
	"github.com/rath-run/rath/pkg/sandbox"
	"github.com/rath-run/rath/pkg/sandbox/docker"
	"github.com/rath-run/rath/pkg/sandbox/local"
	"github.com/rath-run/rath/pkg/sandbox/policy"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/store/sqlitestore"
	"github.com/rath-run/rath/pkg/store/storeurl"
	"github.com/rath-run/rath/pkg/tool/mcp"
)

// Backend is an opened store, run store and bus: what both processes need.
type Backend struct {
	Store store.Store
	Runs  *runs.Store
	Bus   *bus.Bus
	NC    *nats.Conn
	// Memory is the store agents' `memory: local` binds: memory.db beside
	// a sqlite: store's file, or the Postgres database of a postgres:// one.
	Memory memory.Store
	// RunReads reads the run store over the embedded store's read-only
	// connections (coordinator.Config.RunReads); nil on Postgres, whose
	// pool is not one connection.
	RunReads *runs.Store

	runsDB *sql.DB
}

// Close releases the backend's connections (not an embedded NATS server).
func (b *Backend) Close() error {
	var errs []error
	if b.NC != nil {
		errs = append(errs, b.NC.Drain())
	}
	if b.runsDB != nil {
		errs = append(errs, b.runsDB.Close())
	}
	if b.Memory != nil {
		errs = append(errs, b.Memory.Close())
	}
	if b.Store != nil {
		errs = append(errs, b.Store.Close())
	}
	return errors.Join(errs...)
}

// SubmitInOneTx reports whether the coordinator should record a submitted
// session and its run in one transaction (coordinator.Config.SameDatabase):
// always, since both stores share one database. On Postgres that saves a
// fsync'd commit per submit; on SQLite (PutExec, without Tx's savepoints)
// a commit's WAL frames and the writer's second transaction.
func (b *Backend) SubmitInOneTx() bool {
	return true
}

// Embedded reports whether the store is the embedded SQLite store, which
// serves one user (rathctl dev), rather than one that can serve many
// tenants (Postgres).
func (b *Backend) Embedded() bool {
	_, embedded := b.Store.(*sqlitestore.Store)
	return embedded
}

// SandboxPolicy returns the operator's sandbox policy: the YAML file at
// path (--sandbox-policy), else at getenv("RATH_SANDBOX_POLICY"), else
// policy.Default for the backend's store (local allowed only on the
// embedded store). RATH_SANDBOX_IMAGE (else rath-sandbox:busybox) is the
// docker image when the policy names none. The
// coordinator and the workers of a deployment should load the same one.
func SandboxPolicy(path string, b *Backend, getenv func(string) string) (*policy.Policy, error) {
	image := cmp.Or(getenv("RATH_SANDBOX_IMAGE"), docker.DefaultImage)
	if path = cmp.Or(path, getenv("RATH_SANDBOX_POLICY")); path != "" {
		pol, err := policy.Load(path)
		if err != nil {
			return nil, err
		}
		return pol.WithImage(image), nil
	}
	return policy.Default(b.Embedded(), image), nil
}

// BackendConfig says where the backend lives.
type BackendConfig struct {
	// StoreURL is postgres://… or sqlite:PATH.
	StoreURL string
	// Connect opens the NATS connection.
	Connect func() (*nats.Conn, error)
	Bus     bus.Config
	// Migrate applies migrations on open (the coordinator and dev do; workers
	// wait for them).
	Migrate bool
	Logger  *slog.Logger
}

// OpenBackend opens the store (migrating it when asked), the run store and
// the bus. Opening retries for up to a minute while Postgres or NATS are
// still starting.
func OpenBackend(ctx context.Context, cfg BackendConfig) (*Backend, error) {
	log := cmp.Or(cfg.Logger, slog.New(slog.NewTextHandler(io.Discard, nil)))
	b := &Backend{}
	err := retry(ctx, log, "open store", func() error {
		st, err := storeurl.Open(ctx, cfg.StoreURL, storeurl.Options{Create: cfg.Migrate})
		if err != nil {
			return err
		}
		b.Store = st
		return nil
	})
	if err != nil {
		return nil, err
	}
	if cfg.Migrate {
		if err := b.Store.Migrate(ctx); err != nil {
			_ = b.Close()
			return nil, fmt.Errorf("migrate: %w", err)
		}
	}
	if sq, ok := b.Store.(*sqlitestore.Store); ok {
		// One SQLite writer for graph and runs: two connections writing the
		// same file would wait on each other in SQLite's busy handler, which
		// sleeps up to 100 ms a time; one connection queues them in Go.
		b.Runs = runs.NewStore(sq.DB(), nil)
		b.RunReads = runs.NewStore(sq.ReadDB(), nil)
	} else if b.Runs, b.runsDB, err = runs.Open(ctx, cfg.StoreURL); err != nil {
		_ = b.Close()
		return nil, err
	}
	if b.Memory, err = openMemory(ctx, cfg.StoreURL); err != nil {
		_ = b.Close()
		return nil, err
	}
	err = retry(ctx, log, "connect to NATS", func() error {
		nc, err := cfg.Connect()
		if err != nil {
			return err
		}
		b.NC = nc
		return nil
	})
	if err != nil {
		_ = b.Close()
		return nil, err
	}
	if b.Bus, err = bus.New(ctx, b.NC, cfg.Bus); err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("declare streams: %w", err)
	}
	return b, nil
}

func retry(ctx context.Context, log *slog.Logger, what string, fn func() error) error {
	deadline := time.Now().Add(time.Minute)
	delay := 100 * time.Millisecond
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %w", what, err)
		}
		log.WarnContext(ctx, what+" failed; retrying", slog.Any("error", err), slog.Duration("in", delay))
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}

// Resolver returns the worker's model resolver: "scripted" builds the
// scripted model from the spec's replies; other models resolve through
// llm.Resolve with getenv.
func Resolver(getenv func(string) string) worker.ResolveFunc {
	return func(spec agent.Spec) (llm.Provider, string, error) {
		if spec.Model == "scripted" {
			return &llm.Scripted{Replies: spec.Script}, "scripted", nil
		}
		return llm.Resolve(llm.ProviderSpec{Name: spec.Provider}, spec.Model, getenv)
	}
}

// NewWorker builds a worker on a backend. Unless cfg names its own
// SandboxPolicy, the worker enforces [SandboxPolicy] (RATH_SANDBOX_POLICY,
// else the default for the backend's store). Unless cfg names its own
// Workspaces or Sandboxes, steps with tools run in the backends of
// [Sandboxes] that the policy allows; unplaced sessions on the policy's
// default backend. Unless cfg names its own Workspaces, each step's workspace is
// restored from and snapshotted to the bus's object store
// ([worker.SnapshotWorkspaces], limits from [WorkspaceLimits]), so files
// travel with the session between workers. Unless cfg names its own MCP,
// the worker gets an MCP manager (closed when the worker's Run returns)
// that runs the commands RATH_MCP_ALLOW lists (comma-separated; "*" for
// any; unset for none) with PATH and HOME from getenv. Unless cfg names
// its own Memory, agents' memory is the backend's, with embedding recall
// when getenv sets RATH_EMBEDDING_MODEL ([EmbeddingMemory]).
func NewWorker(ctx context.Context, b *Backend, getenv func(string) string, cfg worker.Config) (*worker.Worker, error) {
	if cfg.CrashAt == nil {
		crash, err := CrashAt(getenv("RATH_TEST_CRASH_AT"))
		if err != nil {
			return nil, err
		}
		cfg.CrashAt = crash
	}
	if cfg.SandboxPolicy == nil {
		pol, err := SandboxPolicy("", b, getenv)
		if err != nil {
			return nil, err
		}
		cfg.SandboxPolicy = pol
	}
	if cfg.Workspaces == nil && cfg.Sandboxes == nil {
		sbs, err := Sandboxes(getenv, cfg.SandboxPolicy)
		if err != nil {
			return nil, err
		}
		cfg.Sandboxes = sbs
	}
	if cfg.Workspaces == nil && cfg.Sandboxes != nil {
		ws, err := snapshotWorkspaces(b.Bus, cfg.Sandboxes, getenv, cfg)
		if err != nil {
			return nil, err
		}
		cfg.Workspaces = ws
	}
	if cfg.Memory == nil {
		mem, err := EmbeddingMemory(b.Memory, getenv)
		if err != nil {
			return nil, err
		}
		cfg.Memory = mem
	}
	// Heartbeats must come well within the ack deadline, or every step
	// longer than it is redelivered while it runs.
	ackWait := b.Bus.Config().AckWait
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = min(5*time.Second, ackWait/3)
	}
	if !cfg.NoHeartbeat && cfg.Heartbeat >= ackWait {
		return nil, fmt.Errorf("worker: heartbeat %s must be shorter than the bus's ack wait %s", cfg.Heartbeat, ackWait)
	}
	cfg = cfg.WithDefaults()
	cons, err := b.Bus.Consumer(ctx, cfg.Queue)
	if err != nil {
		return nil, fmt.Errorf("consumer for queue %s: %w", cfg.Queue, err)
	}
	cfg.MaxDeliver = b.Bus.Config().MaxDeliver
	if cfg.MCP == nil {
		m, err := mcp.NewManager(mcp.Config{
			AllowCommands: ParseMCPAllow(getenv("RATH_MCP_ALLOW")),
			Env:           mcp.HostEnv(getenv),
			Logger:        cfg.Logger,
		})
		if err != nil {
			return nil, err
		}
		cfg.MCP = m
	}
	w, err := worker.New(b.Store, b.Runs, cons, b.Bus, Resolver(getenv), cfg)
	if err != nil {
		if c, ok := cfg.MCP.(io.Closer); ok {
			_ = c.Close()
		}
		return nil, err
	}
	return w, nil
}

// Sandboxes returns the sandbox backends pol allows: "local", and "docker"
// on the Engine named by DOCKER_HOST (the local socket when unset) with
// pol's docker image (else RATH_SANDBOX_IMAGE, else rath-sandbox:busybox;
// scripts/sandbox-image.sh builds it), limits and egress network (none
// unless pol grants one). The Engine is contacted only when a session
// placed on "docker" first runs a command. A backend pol does not allow is
// not registered, so no placement can reach it.
//
// While tools run, each workspace is limited to pol's docker disk_bytes,
// else RATH_WORKSPACE_MAX_BYTES (the snapshot limit, default 1 GiB;
// [WorkspaceLimits]), on both backends, and a root worker runs local tools
// as RATH_LOCAL_USER ("uid:gid", default 65534:65534).
func Sandboxes(getenv func(string) string, pol *policy.Policy) (*sandbox.Registry, error) {
	lim, err := WorkspaceLimits(getenv)
	if err != nil {
		return nil, err
	}
	quota := cmp.Or(pol.Docker.DiskBytes, lim.MaxTotalBytes)
	r := sandbox.NewRegistry()
	if pol.Allows(policy.Local) {
		l := local.New(local.Config{User: getenv("RATH_LOCAL_USER"), DiskQuotaBytes: quota})
		if err := l.Check(); err != nil {
			return nil, fmt.Errorf("RATH_LOCAL_USER: %w", err)
		}
		if err := r.Register(l); err != nil {
			return nil, err
		}
	}
	if pol.Allows(policy.Docker) {
		cfg := DockerConfig(getenv, pol)
		cfg.DiskQuotaBytes = quota
		d, err := docker.New(cfg)
		if err != nil {
			return nil, err
		}
		if err := r.Register(d); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// DockerConfig is the docker backend's configuration under pol: its default
// image (else RATH_SANDBOX_IMAGE), CPU, memory and pids limits, and egress
// network (docker.NoEgress unless pol grants one). [Sandboxes] adds the
// workspace disk quota.
func DockerConfig(getenv func(string) string, pol *policy.Policy) docker.Config {
	d := pol.Docker
	return docker.Config{
		Image:         cmp.Or(d.DefaultImage, getenv("RATH_SANDBOX_IMAGE")),
		Memory:        d.MemoryBytes,
		PidsLimit:     d.Pids,
		NanoCPUs:      int64(d.CPUs * 1e9),
		EgressNetwork: cmp.Or(d.EgressNetwork, docker.NoEgress),
	}
}

// ParseMCPAllow splits RATH_MCP_ALLOW: commands separated by commas, "*"
// for any command; blanks are dropped.
func ParseMCPAllow(s string) []string {
	var out []string
	for c := range strings.SplitSeq(s, ",") {
		if c = strings.TrimSpace(c); c != "" {
			out = append(out, c)
		}
	}
	return out
}
