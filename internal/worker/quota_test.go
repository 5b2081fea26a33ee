package worker_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/rath-run/rath/internal/bus/bustest"
	"github.com/rath-run/rath/internal/worker"
	"github.com/rath-run/rath/pkg/sandbox"
	"github.com/rath-run/rath/pkg/sandbox/local"
	"github.com/rath-run/rath/pkg/sandbox/sandboxtest"
	"github.com/rath-run/rath/pkg/session"
)

// TestSnapshotWorkspacesDiskQuota: a root worker's workspace is a tmpfs of
// the backend's quota while tools run, so writing past it fails with
// ENOSPC; the files within it are restored and snapshotted as before, and
// removing the workspace unmounts it. A worker that cannot mount warns
// once and runs without the quota.
func TestSnapshotWorkspacesDiskQuota(t *testing.T) {
	t.Parallel()
	b, _, _ := bustest.NewWith(t, bustest.Options{InProcess: true})
	tmp := sandboxtest.Dir(t)
	var logs bytes.Buffer
	ws := &worker.SnapshotWorkspaces{
		Backends:  sandbox.NewRegistry(local.New(local.Config{DiskQuotaBytes: 2 << 20})),
		Snapshots: snapshotter(t, b),
		Dir:       tmp,
		Logger:    slog.New(slog.NewTextHandler(&logs, nil)),
	}
	ctx := context.Background()
	root := os.Geteuid() == 0

	// A first step leaves a file; the next restores it under the quota.
	sb, done, err := ws.Open(ctx, &session.Version{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.WriteFile(ctx, "kept.txt", []byte("kept"), 0); err != nil {
		t.Fatal(err)
	}
	p, err := done(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	sb, done, err = ws.Open(ctx, &session.Version{Placement: p})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: `cat kept.txt; echo; dd if=/dev/zero of=big bs=1024 count=3072 2>&1; echo "dd-exit=$?"; rm -f big; df -k . | tail -1`})
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Stdout)
	if !strings.HasPrefix(out, "kept\n") {
		t.Errorf("restored file missing under the quota: %q", out)
	}
	if root {
		if !strings.Contains(out, "No space left on device") || strings.Contains(out, "dd-exit=0") {
			t.Errorf("3 MiB written into a 2 MiB workspace: %q", out)
		}
	} else if !strings.Contains(logs.String(), "disk quota not enforced") || !strings.Contains(out, "dd-exit=0") {
		t.Errorf("non-root worker: want the write through and a warning; output %q, logs %q", out, logs.String())
	}
	var dirs []string
	entries, _ := os.ReadDir(tmp)
	for _, e := range entries {
		dirs = append(dirs, tmp+"/"+e.Name())
	}
	if _, err := done(ctx, true); err != nil {
		t.Fatal(err)
	}
	emptyDir(t, tmp)
	for _, d := range dirs {
		var st syscall.Statfs_t
		if err := syscall.Statfs(d, &st); err == nil {
			t.Errorf("workspace %s still exists after done", d)
		}
	}
}
