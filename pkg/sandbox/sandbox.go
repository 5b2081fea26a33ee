// Package sandbox provides the places where an agent's tools run.
//
// A [Backend] opens a [Sandbox] for a placement's [session.Spec] over a
// workspace directory on the worker host. Tools never touch the host
// directly: they run commands and read and write files through a Sandbox,
// whose paths are relative to the workspace root and may not leave it.
//
// Two backends ship: "local" (a confined process on the worker host; not an
// isolation boundary against hostile code) and "docker" (a hardened container
// per placement, the isolation boundary). A [Registry] holds backends by name.
//
// Contract for implementations:
//   - Every path argument is workspace-relative ("." is the root). Absolute
//     paths, "..", and symlinks resolving outside the workspace fail with
//     [ErrOutsideWorkspace].
//   - Exec never returns an error for a command that ran and failed: a non-zero
//     exit, a timeout and truncated output are reported in [ExecResult]. Errors
//     are for sandboxes that cannot run the command (closed, missing
//     executable, engine unreachable).
//   - Methods are safe for concurrent use; Close is idempotent.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rath-run/rath/pkg/session"
)

// Errors a sandbox returns, wrapped with context. Test with errors.Is.
var (
	ErrBackendNotFound  = errors.New("rath: sandbox backend not found")
	ErrOutsideWorkspace = errors.New("rath: path escapes the workspace")
	ErrNotFound         = errors.New("rath: no such file in the workspace")
	ErrClosed           = errors.New("rath: sandbox closed")
	ErrTooLarge         = errors.New("rath: over the sandbox size limit")
	ErrUnsupported      = errors.New("rath: not supported by this sandbox")
	// ErrCommandNotFound means the executable a request names does not exist in
	// the sandbox.
	ErrCommandNotFound = errors.New("rath: command not found in the sandbox")
)

// Isolation is how strongly a backend separates tools from the worker host.
type Isolation string

const (
	// IsolationProcess is a process on the worker host; not a boundary
	// against hostile code.
	IsolationProcess Isolation = "process"
	// IsolationContainer is a hardened container, the isolation boundary.
	IsolationContainer Isolation = "container"
)

// Capabilities describe a backend.
type Capabilities struct {
	Isolation   Isolation     `json:"isolation"`
	ColdStart   time.Duration `json:"cold_start"`
	Languages   []string      `json:"languages"` // RunCode languages
	MaxSandbox  int           `json:"max_sandboxes,omitempty"`
	Description string        `json:"description,omitempty"`
}

// Backend opens sandboxes.
type Backend interface {
	// Name is the placement's backend name ("local", "docker").
	Name() string
	Capabilities() Capabilities
	// Open opens a sandbox whose workspace is the host directory dir, which
	// exists. The sandbox sees dir as its working directory.
	Open(ctx context.Context, spec session.Spec, dir string) (Sandbox, error)
}

// DiskQuota is implemented by backends whose workspaces are size-limited
// while commands run. DiskQuota returns the limit in bytes, 0 for none. A
// backend cannot enforce it alone: the workspace directory exists (with
// the restored files in it) before Open, so whoever creates the directory
// enforces it; the worker mounts a tmpfs of that size there before
// restoring into it (internal/worker.SnapshotWorkspaces), so a command
// writing past it gets ENOSPC while the worker's disk and other
// sandboxes are unaffected.
type DiskQuota interface {
	DiskQuota() int64
}

// Sandbox runs commands and file operations inside one workspace.
type Sandbox interface {
	Exec(ctx context.Context, req ExecRequest) (ExecResult, error)
	ReadFile(ctx context.Context, path string, limit int64) ([]byte, error)
	// WriteFile creates parent directories as needed.
	WriteFile(ctx context.Context, path string, data []byte, perm fs.FileMode) error
	// List returns the entries of a directory, sorted by name, non-recursive.
	List(ctx context.Context, path string) ([]FileInfo, error)
	Stat(ctx context.Context, path string) (FileInfo, error)
	Close(ctx context.Context) error
}

// ExecRequest is one command. Exactly one of Argv and Shell is set.
type ExecRequest struct {
	Argv  []string
	Shell string // run with /bin/sh -c
	Stdin []byte
	// Env is added to the sandbox's scrubbed base environment.
	Env map[string]string
	// Dir is workspace-relative; "" is the workspace root.
	Dir string
	// Timeout bounds the call; 0 means the backend default. On timeout the
	// whole process tree is killed.
	Timeout time.Duration
	// MaxOutput caps stdout and stderr each; 0 means the backend default.
	MaxOutput int
}

// Command returns the argv the request runs: Argv, or /bin/sh -c Shell. A
// request with both or neither set is an error naming the fields.
func (r ExecRequest) Command() ([]string, error) {
	switch {
	case len(r.Argv) > 0 && r.Shell != "":
		return nil, errors.New("sandbox: exec request sets both argv and shell")
	case len(r.Argv) > 0:
		if r.Argv[0] == "" {
			return nil, errors.New("sandbox: exec request argv[0] is empty")
		}
		return r.Argv, nil
	case r.Shell != "":
		return []string{"/bin/sh", "-c", r.Shell}, nil
	default:
		return nil, errors.New("sandbox: exec request sets neither argv nor shell")
	}
}

// ExecResult is what a command did.
type ExecResult struct {
	ExitCode        int           `json:"exit_code"`
	Stdout          []byte        `json:"stdout"`
	Stderr          []byte        `json:"stderr"`
	StdoutTruncated bool          `json:"stdout_truncated,omitempty"`
	StderrTruncated bool          `json:"stderr_truncated,omitempty"`
	TimedOut        bool          `json:"timed_out,omitempty"`
	Elapsed         time.Duration `json:"elapsed"`
}

// FileInfo describes one workspace entry.
type FileInfo struct {
	Name  string      `json:"name"`
	Path  string      `json:"path"` // workspace-relative, slash-separated
	IsDir bool        `json:"is_dir"`
	Size  int64       `json:"size"`
	Mode  fs.FileMode `json:"mode"`
}

// Registry holds backends by name. The zero value is empty and ready.
type Registry struct {
	mu       sync.RWMutex
	backends map[string]Backend
}

// NewRegistry returns a registry holding bs.
func NewRegistry(bs ...Backend) *Registry {
	r := &Registry{}
	for _, b := range bs {
		if err := r.Register(b); err != nil {
			panic(err) // programmer error: duplicate names in a literal list
		}
	}
	return r
}

// Register adds b; a second backend of the same name is an error.
func (r *Registry) Register(b Backend) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.backends == nil {
		r.backends = map[string]Backend{}
	}
	if _, ok := r.backends[b.Name()]; ok {
		return fmt.Errorf("sandbox: backend %q registered twice", b.Name())
	}
	r.backends[b.Name()] = b
	return nil
}

// Get returns the named backend. An unknown name's error lists those
// available.
func (r *Registry) Get(name string) (Backend, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if b, ok := r.backends[name]; ok {
		return b, nil
	}
	return nil, fmt.Errorf("%w: %q (available: %s)", ErrBackendNotFound, name, strings.Join(r.namesLocked(), ", "))
}

// Names lists registered backends, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.namesLocked()
}

func (r *Registry) namesLocked() []string {
	names := make([]string, 0, len(r.backends))
	for n := range r.backends {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
