package hostfs

import (
	"context"
	"io/fs"

	"github.com/rath-run/rath/pkg/sandbox"
)

// Files is the file half of a [sandbox.Sandbox] on a host workspace, shared
// by the backends: each method first runs the backend's check (a canceled
// ctx or a closed sandbox fails the call) and then the confined [FS]
// operation. A backend embeds it so the four methods are promoted.
type Files struct {
	fs    *FS
	check func(context.Context) error
}

// NewFiles returns the file methods over fsys, guarded by check.
func NewFiles(fsys *FS, check func(context.Context) error) Files {
	return Files{fs: fsys, check: check}
}

// ReadFile reads a workspace file from the host side; limit > 0 refuses
// larger files with sandbox.ErrTooLarge.
func (f Files) ReadFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	if err := f.check(ctx); err != nil {
		return nil, err
	}
	return f.fs.ReadFile(path, limit)
}

// WriteFile writes a workspace file from the host side, creating parents.
// When the backend set an owner on the workspace (a root worker writing for
// a container's non-root user), what it creates is owned by that user.
func (f Files) WriteFile(ctx context.Context, path string, data []byte, perm fs.FileMode) error {
	if err := f.check(ctx); err != nil {
		return err
	}
	return f.fs.WriteFile(path, data, perm)
}

// List lists a workspace directory.
func (f Files) List(ctx context.Context, path string) ([]sandbox.FileInfo, error) {
	if err := f.check(ctx); err != nil {
		return nil, err
	}
	return f.fs.List(path)
}

// Stat describes a workspace path.
func (f Files) Stat(ctx context.Context, path string) (sandbox.FileInfo, error) {
	if err := f.check(ctx); err != nil {
		return sandbox.FileInfo{}, err
	}
	return f.fs.Stat(path)
}
