package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/rath-run/rath/pkg/sandbox"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/workspace"
)

// SnapshotWorkspaces is the [Workspaces] that makes files travel with the
// session (docs/architecture.md §5): Open restores the input placement's snapshot (if
// any) into a fresh temporary directory and opens the placement's backend
// ("local" when unplaced) there; done(ok=true) closes the sandbox, snapshots
// the directory and returns the input placement with the new snapshot id,
// which the committed version records. The directory is removed in both
// cases. A step that changed nothing returns the input's id and writes
// nothing; a fork shares its parent's id, so each branch restores the same
// files and snapshots its own changes.
//
// A snapshot that is missing, corrupt or over the limits fails the step
// permanently (retrying cannot help); other store errors are transient.
//
// When the backend has a disk quota ([sandbox.DiskQuota]), the directory is
// a tmpfs of that size, mounted before the restore and unmounted when the
// directory is removed: a tool writing past the quota gets ENOSPC, and the
// worker's disk and other steps are unaffected. Mounting needs root (with
// CAP_SYS_ADMIN); where it fails the step runs without the quota (the
// snapshot limits still hold afterwards) and the first failure is logged
// as a warning.
type SnapshotWorkspaces struct {
	// Backends holds the sandbox backends by name.
	Backends *sandbox.Registry
	// Snapshots stores and restores workspaces (the JetStream object
	// store in a deployment).
	Snapshots *workspace.Snapshotter
	// Dir is the parent of the temporary directories; default os.TempDir().
	Dir string
	// Logger defaults to discarding.
	Logger *slog.Logger

	quotaWarned atomic.Bool
}

// errQuotaUnsupported: this worker cannot mount (not root, not Linux).
var errQuotaUnsupported = errors.New("workspace quotas need a root worker on Linux")

// mountQuota puts dir under b's disk quota, if it has one, and reports
// whether it did.
func (w *SnapshotWorkspaces) mountQuota(ctx context.Context, log *slog.Logger, b sandbox.Backend, dir string) bool {
	q, ok := b.(sandbox.DiskQuota)
	if !ok || q.DiskQuota() <= 0 {
		return false
	}
	if err := mountQuota(dir, q.DiskQuota()); err != nil {
		if !w.quotaWarned.Swap(true) {
			log.WarnContext(ctx, "workspace: disk quota not enforced while tools run (the snapshot limits still apply)",
				slog.String("backend", b.Name()), slog.Int64("quota_bytes", q.DiskQuota()), slog.Any("error", err))
		}
		return false
	}
	return true
}

// Open implements [Workspaces].
func (w *SnapshotWorkspaces) Open(ctx context.Context, in *session.Version) (sandbox.Sandbox, DoneFunc, error) {
	sb, done, _, err := w.OpenFrom(ctx, in, "")
	return sb, done, err
}

// OpenFrom implements [CheckpointWorkspaces]: the directory is restored
// from snapshot from when it is set (a resumed step's last round), else
// from the input placement's. A checkpoint is an ordinary snapshot of the
// directory, content-addressed, so a round that changed nothing writes
// nothing, and the final snapshot of a resumed step is the one an
// uninterrupted step would have made.
func (w *SnapshotWorkspaces) OpenFrom(ctx context.Context, in *session.Version, from string) (sandbox.Sandbox, DoneFunc, func(context.Context) (string, error), error) {
	if w.Backends == nil || w.Snapshots == nil {
		return nil, nil, nil, errors.New("workspace: SnapshotWorkspaces needs Backends and Snapshots")
	}
	log := w.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	place := in.Placement
	b, err := w.Backends.Get(cmp.Or(place.Backend, DefaultBackend))
	if err != nil {
		return nil, nil, nil, permanent(fmt.Errorf("workspace: %w", err))
	}
	dir, err := os.MkdirTemp(w.Dir, "rath-ws-")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("workspace: %w", err)
	}
	quota := w.mountQuota(ctx, log, b, dir)
	removeTree := func(dir string) error {
		if quota {
			if err := unmountQuota(dir); err != nil {
				return err
			}
		}
		return removeTree(dir)
	}
	base := cmp.Or(from, place.Snapshot)
	if _, err := w.Snapshots.Restore(ctx, base, dir); err != nil {
		_ = removeTree(dir)
		return nil, nil, nil, classify(fmt.Errorf("workspace: restore snapshot of version %s: %w", in.ID, err))
	}
	sb, err := b.Open(ctx, place.Spec, dir)
	if err != nil {
		_ = removeTree(dir)
		return nil, nil, nil, fmt.Errorf("workspace: open %s sandbox: %w", b.Name(), err)
	}
	done := func(ctx context.Context, ok bool) (session.Placement, error) {
		out := place
		err := sb.Close(ctx)
		if err != nil {
			err = fmt.Errorf("workspace: close sandbox: %w", err)
		} else if ok {
			res, serr := w.Snapshots.Snapshot(ctx, dir, base)
			if serr != nil {
				err = classify(fmt.Errorf("workspace: snapshot: %w", serr))
			} else {
				out.Snapshot = res.ID
				if len(res.Skipped) > 0 {
					log.WarnContext(ctx, "workspace: special files not recorded", slog.Any("paths", res.Skipped))
				}
				log.DebugContext(ctx, "workspace snapshot", slog.String("snapshot", res.ID),
					slog.Int("objects_written", res.ObjectsWritten), slog.Int64("bytes_written", res.BytesWritten))
			}
		}
		if rerr := removeTree(dir); rerr != nil {
			err = errors.Join(err, fmt.Errorf("workspace: remove %s: %w", dir, rerr))
		}
		return out, err
	}
	checkpoint := func(ctx context.Context) (string, error) {
		res, err := w.Snapshots.Snapshot(ctx, dir, base)
		if err != nil {
			return "", classify(fmt.Errorf("workspace: checkpoint: %w", err))
		}
		base = res.ID
		return res.ID, nil
	}
	return sb, done, checkpoint, nil
}

// classify marks workspace errors that a retry cannot fix as permanent.
func classify(err error) error {
	switch {
	case errors.Is(err, workspace.ErrNotFound), errors.Is(err, workspace.ErrCorrupt),
		errors.Is(err, workspace.ErrInvalidManifest), errors.Is(err, workspace.ErrTooLarge),
		errors.Is(err, workspace.ErrUnsafePath):
		return permanent(err)
	}
	return err
}

// removeTree removes dir even when a tool left read-only directories in it.
func removeTree(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	// Make every directory writable (WalkDir does not follow symlinks),
	// then try again.
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}
