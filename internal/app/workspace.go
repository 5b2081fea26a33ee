package app

import (
	"fmt"
	"strconv"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/worker"
	"github.com/rath-run/rath/pkg/sandbox"
	"github.com/rath-run/rath/pkg/workspace"
)

// WorkspaceLimits reads the workspace size limits from the environment:
// RATH_WORKSPACE_MAX_BYTES (all files together), RATH_WORKSPACE_MAX_FILES
// (entries: files, directories and symlinks) and
// RATH_WORKSPACE_MAX_FILE_BYTES (one file). Unset means the default (see
// package workspace); a bad value is an error naming the variable.
func WorkspaceLimits(getenv func(string) string) (workspace.Limits, error) {
	var l workspace.Limits
	for _, v := range []struct {
		name string
		set  func(int64)
	}{
		{"RATH_WORKSPACE_MAX_BYTES", func(n int64) { l.MaxTotalBytes = n }},
		{"RATH_WORKSPACE_MAX_FILES", func(n int64) { l.MaxFiles = int(n) }},
		{"RATH_WORKSPACE_MAX_FILE_BYTES", func(n int64) { l.MaxFileBytes = n }},
	} {
		s := getenv(v.name)
		if s == "" {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 || n > 1<<50 {
			return l, fmt.Errorf("%s=%q: want a positive integer", v.name, s)
		}
		v.set(n)
	}
	return l.WithDefaults(), nil
}

// snapshotWorkspaces makes a step's workspace travel as a snapshot in the
// bus's object store, opening sandboxes from backends.
func snapshotWorkspaces(b *bus.Bus, backends *sandbox.Registry, getenv func(string) string, cfg worker.Config) (*worker.SnapshotWorkspaces, error) {
	lim, err := WorkspaceLimits(getenv)
	if err != nil {
		return nil, err
	}
	snaps, err := workspace.New(workspace.JetStream(b.JetStream(), b.Workspaces()), workspace.Config{Limits: lim})
	if err != nil {
		return nil, err
	}
	return &worker.SnapshotWorkspaces{Backends: backends, Snapshots: snaps, Logger: cfg.Logger}, nil
}
