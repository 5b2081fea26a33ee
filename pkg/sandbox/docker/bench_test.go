package docker_test

import (
	"context"
	"io"
	"os/exec"
	"testing"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/rath-run/rath/pkg/sandbox"
	"github.com/rath-run/rath/pkg/sandbox/docker"
	"github.com/rath-run/rath/pkg/session"
)

// benchSandbox returns a warm sandbox (its container started).
func benchSandbox(b *testing.B) *docker.Sandbox {
	be := newBackend(b, docker.Config{})
	sb, _ := openSandbox(b, be, session.Spec{})
	exec1(b, sb, sandbox.ExecRequest{Argv: []string{"true"}})
	return sb
}

// BenchmarkExecWarm: one tool call (Exec of `echo hi`) in a warm sandbox.
func BenchmarkExecWarm(b *testing.B) {
	sb := benchSandbox(b)
	ctx := context.Background()
	for b.Loop() {
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"echo", "hi"}})
		if err != nil || string(res.Stdout) != "hi\n" {
			b.Fatalf("%+v %v", res, err)
		}
	}
}

// BenchmarkBareDockerExecCLI: `docker exec <container> echo hi`, the budget's
// reference, in the same container.
func BenchmarkBareDockerExecCLI(b *testing.B) {
	sb := benchSandbox(b)
	id := sb.ContainerID()
	if _, err := exec.LookPath("docker"); err != nil {
		b.Skip("no docker CLI on PATH")
	}
	for b.Loop() {
		out, err := exec.Command("docker", "exec", id, "echo", "hi").Output()
		if err != nil || string(out) != "hi\n" {
			b.Fatalf("%q %v", out, err)
		}
	}
}

// BenchmarkBareDockerExecAPI: the same exec through the Engine API with no
// wrapper, caps or kill machinery: create, attach, demultiplex, inspect.
func BenchmarkBareDockerExecAPI(b *testing.B) {
	sb := benchSandbox(b)
	id := sb.ContainerID()
	ctx := context.Background()
	for b.Loop() {
		ex, err := engine.ExecCreate(ctx, id, client.ExecCreateOptions{Cmd: []string{"echo", "hi"}, AttachStdout: true, AttachStderr: true})
		if err != nil {
			b.Fatal(err)
		}
		att, err := engine.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
		if err != nil {
			b.Fatal(err)
		}
		_, err = stdcopy.StdCopy(io.Discard, io.Discard, att.Reader)
		att.Close()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := engine.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkColdStart: open a sandbox, run its first command (creating and
// starting the container), close it (removing the container).
func BenchmarkColdStart(b *testing.B) {
	be := newBackend(b, docker.Config{})
	dir := b.TempDir()
	ctx := context.Background()
	for b.Loop() {
		sb, err := be.Open(ctx, session.Spec{}, dir)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"true"}}); err != nil {
			b.Fatal(err)
		}
		if err := sb.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
