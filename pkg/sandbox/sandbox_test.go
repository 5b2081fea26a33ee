package sandbox_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/sandbox"
	"github.com/rath-run/rath/pkg/session"
)

func TestExecRequestCommand(t *testing.T) {
	t.Parallel()
	argv, err := sandbox.ExecRequest{Shell: "echo hi"}.Command()
	if err != nil || !slices.Equal(argv, []string{"/bin/sh", "-c", "echo hi"}) {
		t.Fatalf("shell: %q %v", argv, err)
	}
	argv, err = sandbox.ExecRequest{Argv: []string{"ls", "-l"}}.Command()
	if err != nil || !slices.Equal(argv, []string{"ls", "-l"}) {
		t.Fatalf("argv: %q %v", argv, err)
	}
	for name, req := range map[string]sandbox.ExecRequest{
		"neither": {}, "both": {Argv: []string{"ls"}, Shell: "ls"}, "empty argv[0]": {Argv: []string{""}},
	} {
		if _, err := req.Command(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

type named string

func (n named) Name() string                       { return string(n) }
func (n named) Capabilities() sandbox.Capabilities { return sandbox.Capabilities{} }
func (n named) Open(context.Context, session.Spec, string) (sandbox.Sandbox, error) {
	return nil, sandbox.ErrUnsupported
}

func TestRegistry(t *testing.T) {
	t.Parallel()
	r := sandbox.NewRegistry(named("local"), named("docker"))
	if b, err := r.Get("docker"); err != nil || b.Name() != "docker" {
		t.Fatalf("Get(docker): %v %v", b, err)
	}
	_, err := r.Get("firecracker")
	if !errors.Is(err, sandbox.ErrBackendNotFound) || !strings.Contains(err.Error(), "docker, local") || !strings.Contains(err.Error(), "firecracker") {
		t.Fatalf("unknown backend: %v", err)
	}
	if err := r.Register(named("local")); err == nil {
		t.Fatal("duplicate name accepted")
	}
	if !slices.Equal(r.Names(), []string{"docker", "local"}) {
		t.Fatalf("Names = %v", r.Names())
	}
}
