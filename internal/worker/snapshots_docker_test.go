package worker_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/sandbox"
	"github.com/rath-run/rath/pkg/sandbox/docker"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/tool/builtin"
)

// dockerBackends returns a constructor of registries holding a docker
// backend on the machine's Engine (and the default image, built locally).
// Without an Engine the test is skipped, unless RATH_REQUIRE_DOCKER=1 or
// CI=true, when it fails.
func dockerBackends(t *testing.T) func() *sandbox.Registry {
	t.Helper()
	testenv.RequireDocker(t)
	script, _ := filepath.Abs("../../scripts/sandbox-image.sh")
	if out, err := exec.Command(script).CombinedOutput(); err != nil {
		t.Fatalf("build the sandbox image: %v\n%s", err, out)
	}
	return func() *sandbox.Registry {
		b, err := docker.New(docker.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return sandbox.NewRegistry(b)
	}
}

// TestWorkspaceTravelsOnDocker: a session placed on docker keeps its files
// across steps on two workers (each step a new container), and a fork's
// branches change them independently.
func TestWorkspaceTravelsOnDocker(t *testing.T) {
	t.Parallel()
	r := newWSRig(t, dockerBackends(t))
	ctx := context.Background()
	in, err := session.FromUserMessage(ctx, r.graph, "build something")
	if err != nil {
		t.Fatal(err)
	}
	placed, err := in.To(ctx, session.Placement{Backend: docker.Name})
	if err != nil {
		t.Fatal(err)
	}
	shell := func(cmd string) map[string]string { return map[string]string{"cmd": cmd} }

	s1, res := r.step(t, 0, placed.ID(), call(builtin.RunShellCommand, shell("mkdir -p out && echo made in a container > out/a.txt")))
	if !strings.Contains(res, `"exit_code":0`) {
		t.Fatalf("step 1: %s", res)
	}
	if p := s1.Placement(); p.Backend != docker.Name || p.Snapshot == "" {
		t.Fatalf("step 1 placement %+v", p)
	}
	_, res = r.step(t, 1, s1.ID(), call(builtin.RunShellCommand, shell("cat out/a.txt")))
	if !strings.Contains(res, "made in a container") {
		t.Fatalf("worker B's container read %s, want worker A's file", res)
	}

	forkA, err := s1.Fork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	forkB, err := s1.Fork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := r.step(t, 0, forkA.ID(), call(builtin.RunShellCommand, shell("echo A > out/a.txt")))
	b, _ := r.step(t, 1, forkB.ID(), call(builtin.RunShellCommand, shell("rm out/a.txt && echo B > b.txt")))
	for _, tc := range []struct {
		name string
		s    session.Session
		want map[string]string
	}{
		{"parent", s1, map[string]string{"out/a.txt": "made in a container\n"}},
		{"branch A", a, map[string]string{"out/a.txt": "A\n"}},
		{"branch B", b, map[string]string{"b.txt": "B\n"}},
	} {
		got := r.files(t, tc.s)
		if len(got) != len(tc.want) {
			t.Errorf("%s: files %v, want %v", tc.name, got, tc.want)
		}
		for p, w := range tc.want {
			if got[p] != w {
				t.Errorf("%s: %s = %q, want %q", tc.name, p, got[p], w)
			}
		}
	}
	emptyDir(t, r.tmp[0])
	emptyDir(t, r.tmp[1])
}
