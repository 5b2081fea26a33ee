package worker_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/rath-run/rath/internal/worker"
	"github.com/rath-run/rath/pkg/sandbox"
	"github.com/rath-run/rath/pkg/sandbox/local"
	"github.com/rath-run/rath/pkg/sandbox/sandboxtest"
	"github.com/rath-run/rath/pkg/session"
)

func TestTempWorkspaces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	parent := sandboxtest.Dir(t)
	ws := &worker.TempWorkspaces{Backends: sandbox.NewRegistry(local.New(local.Config{})), Dir: parent}
	in := &session.Version{Placement: session.Placement{Snapshot: "sha256:kept"}}
	sb, done, err := ws.Open(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.WriteFile(ctx, "a.txt", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(parent)
	if len(entries) != 1 {
		t.Fatalf("%d workspace dirs", len(entries))
	}
	p, err := done(ctx, true)
	if err != nil || p.Snapshot != in.Placement.Snapshot || p.Backend != "" {
		t.Fatalf("placement %+v, %v", p, err)
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Fatal("workspace dir left behind")
	}
	if _, err := sb.Stat(ctx, "a.txt"); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("sandbox still open: %v", err)
	}

	_, _, err = ws.Open(ctx, &session.Version{Placement: session.Placement{Backend: "quantum"}})
	if !errors.Is(err, sandbox.ErrBackendNotFound) {
		t.Fatalf("unknown backend: %v", err)
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Fatal("failed open left a dir")
	}
	if _, _, err := (&worker.TempWorkspaces{}).Open(ctx, in); err == nil {
		t.Fatal("no backends accepted")
	}
}
