package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/rath-run/rath/pkg/sandbox"
	"github.com/rath-run/rath/pkg/session"
)

// Workspaces opens the sandbox a step's tools run in. The worker calls Open
// once per step whose agent has tools, before the agent loop, and calls done
// exactly once after it: ok is true when the loop finished and its version
// is about to be committed, false when the step failed or was abandoned.
// When ok is true, done returns the placement the committed version records
// (the input's placement with, for example, a new workspace snapshot id);
// when ok is false its placement is ignored and done only releases what
// Open took. done closes the sandbox in both cases.
//
// Implementations must be safe for concurrent use: a worker runs several
// steps at once.
type Workspaces interface {
	Open(ctx context.Context, in *session.Version) (sb sandbox.Sandbox, done DoneFunc, err error)
}

// DoneFunc ends a step's use of a workspace; see [Workspaces].
type DoneFunc func(ctx context.Context, ok bool) (session.Placement, error)

// TempWorkspaces is the default [Workspaces]: it opens the input placement's
// backend ("local" when the session is unplaced) over a fresh temporary
// directory, removed when the step ends, and returns the input placement
// unchanged. Files therefore do not outlive a step; a Workspaces that
// snapshots the directory (JetStream object store) replaces it for that.
type TempWorkspaces struct {
	// Backends holds the sandbox backends by name.
	Backends *sandbox.Registry
	// Dir is the parent of the temporary directories; default os.TempDir().
	Dir string
}

// DefaultBackend is the backend an unplaced session's tools run on when
// the worker has no sandbox policy (Config.SandboxPolicy); under a policy
// the worker hands Open the policy's default instead.
const DefaultBackend = "local"

// Open implements [Workspaces].
func (t *TempWorkspaces) Open(ctx context.Context, in *session.Version) (sandbox.Sandbox, DoneFunc, error) {
	if t.Backends == nil {
		return nil, nil, errors.New("workspace: no sandbox backends configured")
	}
	place := in.Placement
	b, err := t.Backends.Get(cmp.Or(place.Backend, DefaultBackend))
	if err != nil {
		// Retrying on this worker cannot help.
		return nil, nil, permanent(fmt.Errorf("workspace: %w", err))
	}
	dir, err := os.MkdirTemp(t.Dir, "rath-ws-")
	if err != nil {
		return nil, nil, fmt.Errorf("workspace: %w", err)
	}
	sb, err := b.Open(ctx, place.Spec, dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("workspace: open %s sandbox: %w", b.Name(), err)
	}
	done := func(ctx context.Context, _ bool) (session.Placement, error) {
		err := sb.Close(ctx)
		if rerr := os.RemoveAll(dir); rerr != nil {
			err = errors.Join(err, rerr)
		}
		if err != nil {
			return place, fmt.Errorf("workspace: close: %w", err)
		}
		return place, nil
	}
	return sb, done, nil
}
