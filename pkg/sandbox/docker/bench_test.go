package docker_test

import (
	"context"
	"io"
	"os/exec"
	"testing"
	"time"

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

// BenchmarkWarmVsBare interleaves, per iteration, one sandbox call, one
// bare `docker exec` (CLI) and one bare API exec of the same `echo hi` in
// the same container, so load on a shared machine hits all three alike.
// Metrics: ms per call of each, and the sandbox call's ratio to each bare
// one (docs/architecture.md §10 budget: ≤ 1.2× the bare docker exec).
func BenchmarkWarmVsBare(b *testing.B) {
	sb := benchSandbox(b)
	id := sb.ContainerID()
	ctx := context.Background()
	var tRath, tCLI, tAPI time.Duration
	for b.Loop() {
		t0 := time.Now()
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"echo", "hi"}})
		if err != nil || string(res.Stdout) != "hi\n" {
			b.Fatalf("%+v %v", res, err)
		}
		t1 := time.Now()
		out, err := exec.Command("docker", "exec", id, "echo", "hi").Output()
		if err != nil || string(out) != "hi\n" {
			b.Fatalf("docker exec: %q %v", out, err)
		}
		t2 := time.Now()
		bareAPI(b, id)
		t3 := time.Now()
		tRath += t1.Sub(t0)
		tCLI += t2.Sub(t1)
		tAPI += t3.Sub(t2)
	}
	n := float64(b.N)
	b.ReportMetric(float64(tRath.Milliseconds())/n, "rath-ms/call")
	b.ReportMetric(float64(tCLI.Milliseconds())/n, "cli-ms/call")
	b.ReportMetric(float64(tAPI.Milliseconds())/n, "api-ms/call")
	b.ReportMetric(float64(tRath)/float64(tCLI), "x-cli")
	b.ReportMetric(float64(tRath)/float64(tAPI), "x-api")
}

func bareAPI(b *testing.B, id string) {
	ctx := context.Background()
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
