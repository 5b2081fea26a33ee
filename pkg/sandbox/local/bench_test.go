package local_test

import (
	"context"
	"os/exec"
	"testing"

	"github.com/rath-run/rath/pkg/sandbox"
	"github.com/rath-run/rath/pkg/sandbox/local"
	"github.com/rath-run/rath/pkg/sandbox/sandboxtest"
	"github.com/rath-run/rath/pkg/session"
)

// BenchmarkExec: one local Exec of `true`.
func BenchmarkExec(b *testing.B) {
	sb, err := local.New(local.Config{}).Open(context.Background(), session.Spec{}, sandboxtest.Dir(b))
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close(context.Background())
	ctx := context.Background()
	for b.Loop() {
		if _, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"true"}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBareExec: os/exec of the same `true`, the floor for a process.
func BenchmarkBareExec(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadFile: a 4 KiB workspace read through the confinement.
func BenchmarkReadFile(b *testing.B) {
	sb, err := local.New(local.Config{}).Open(context.Background(), session.Spec{}, sandboxtest.Dir(b))
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close(context.Background())
	ctx := context.Background()
	if err := sb.WriteFile(ctx, "d/f.txt", make([]byte, 4096), 0); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := sb.ReadFile(ctx, "d/f.txt", 0); err != nil {
			b.Fatal(err)
		}
	}
}
