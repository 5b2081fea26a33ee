package agent

import (
	"errors"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/session"
)

func TestParseSpecSandbox(t *testing.T) {
	t.Parallel()
	s, err := ParseSpec([]byte("name: a\nmodel: m\nsandbox:\n  backend: docker\n  image: rath-sandbox:busybox\n  network: egress\n  timeout_seconds: 60\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := session.Placement{Backend: "docker", Spec: session.Spec{Image: "rath-sandbox:busybox", Network: "egress", TimeoutSeconds: 60}}
	if s.Sandbox == nil || s.Sandbox.Placement().Backend != want.Backend || s.Sandbox.Placement().Spec.Image != want.Spec.Image ||
		s.Sandbox.Placement().Spec.Network != want.Spec.Network || s.Sandbox.Placement().Spec.TimeoutSeconds != 60 {
		t.Errorf("sandbox = %+v, want %+v", s.Sandbox, want)
	}
	if s, err := ParseSpec([]byte("name: a\nmodel: m\n")); err != nil || s.Sandbox != nil {
		t.Errorf("no sandbox block: %+v, %v; want nil", s.Sandbox, err)
	}
}

func TestParseSpecSandboxInvalid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, sandbox, want string }{
		{"no backend", `{image: x}`, "sandbox.backend: required"},
		{"unknown backend", `{backend: vm}`, `sandbox.backend: "vm"`},
		{"network", `{backend: docker, network: bridge}`, `sandbox.network: "bridge"`},
		{"local image", `{backend: local, image: x}`, "sandbox.image"},
		{"local network", `{backend: local, network: egress}`, "sandbox.network"},
		{"timeout", `{backend: docker, timeout_seconds: -1}`, "sandbox.timeout_seconds"},
		{"unknown field", "\n  backend: docker\n  cpu: 2", `unknown field "cpu"`},
		{"not an object", `docker`, "sandbox"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseSpec([]byte("name: a\nmodel: m\nsandbox: " + tc.sandbox + "\n"))
			if !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
