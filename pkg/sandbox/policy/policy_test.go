package policy_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/sandbox/policy"
	"github.com/rath-run/rath/pkg/session"
)

func TestParseErrorsNameLineAndField(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, yaml, want string
	}{
		{"empty", "", "backends is required"},
		{"no backends", "default: docker\n", "backends: required"},
		{"unknown field", "backends: [docker]\ndocker:\n  networks: [host]\n", "line 3: field networks not found"},
		{"typo at top", "backends: [docker]\nbackend: local\n", "line 2: field backend not found"},
		{"bad type", "backends: docker\n", "line 1: cannot unmarshal"},
		{"unknown backend", "backends: [docker, firecracker]\n", `backends[1]: "firecracker"`},
		{"duplicate backend", "backends: [docker, docker]\n", `backends[1]: "docker" listed twice`},
		{"default not allowed", "backends: [docker]\ndefault: local\n", `default: "local" is not in backends`},
		{"host egress", "backends: [docker]\ndocker: {egress_network: host}\n", "docker.egress_network"},
		{"container egress", "backends: [docker]\ndocker: {egress_network: \"container:x\"}\n", "docker.egress_network"},
		{"bad image", "backends: [docker]\ndocker: {images: [\"a b\"]}\n", "docker.images[0]"},
		{"default image not listed", "backends: [docker]\ndocker: {images: [a:1], default_image: b:1}\n", "docker.default_image"},
		{"negative pids", "backends: [docker]\ndocker: {pids: -1}\n", "docker.pids"},
		{"tiny memory", "backends: [docker]\ndocker: {memory_bytes: 1}\n", "docker.memory_bytes"},
		{"nan cpus", "backends: [docker]\ndocker: {cpus: .nan}\n", "docker.cpus"},
		{"negative disk", "backends: [docker]\ndocker: {disk_bytes: -5}\n", "docker.disk_bytes"},
		{"two documents", "backends: [docker]\n---\nbackends: [local]\n", "more than one YAML document"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := policy.Parse([]byte(c.yaml))
			if err == nil || !errors.Is(err, policy.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse(%q) = %v, want an ErrInvalid naming %q", c.yaml, err, c.want)
			}
		})
	}
}

func TestParseDefaults(t *testing.T) {
	t.Parallel()
	p, err := policy.Parse([]byte("backends: [local, docker]\ndocker:\n  images: [a:1, b:2]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Default != policy.Docker || p.Docker.DefaultImage != "a:1" || p.Docker.EgressNetwork != "" || p.Docker.AllowEntrypoint {
		t.Fatalf("defaults: %+v", p)
	}
	p, err = policy.Parse([]byte("backends: []\n"))
	if err != nil || p.Default != "" {
		t.Fatalf("backends: [] = %+v, %v; want no default", p, err)
	}
}

func TestShippedPoliciesParse(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"deploy/compose/sandbox-policy.yaml", "deploy/k8s/base/sandbox-policy.yaml"} {
		p, err := policy.Load(filepath.Join("..", "..", "..", f))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if _, err := p.Check(session.Placement{}); err != nil {
			t.Errorf("%s: an unplaced session is refused: %v", f, err)
		}
	}
}

// check returns Check's error message, "" when allowed.
func check(p *policy.Policy, pl session.Placement) string {
	if _, err := p.Check(pl); err != nil {
		if !errors.Is(err, policy.ErrNotAllowed) {
			return "NOT ErrNotAllowed: " + err.Error()
		}
		return err.Error()
	}
	return ""
}

func TestCheck(t *testing.T) {
	t.Parallel()
	tenants := policy.Default(false, "rath-sandbox:busybox")
	egress, err := policy.Parse([]byte("backends: [docker]\ndocker: {images: [rath-sandbox:busybox, tools:1], egress_network: rath-egress, allow_entrypoint: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	dev := policy.Default(true, "")
	none, err := policy.Parse([]byte("backends: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	dock := func(s session.Spec) session.Placement { return session.Placement{Backend: "docker", Spec: s} }
	for _, c := range []struct {
		name string
		p    *policy.Policy
		pl   session.Placement
		want string // a regexp; "" means allowed
	}{
		{"unplaced runs on docker", tenants, session.Placement{}, ""},
		{"docker", tenants, dock(session.Spec{}), ""},
		{"local refused", tenants, session.Placement{Backend: "local"}, `^placement\.backend: "local" is not allowed by the operator's sandbox policy \(allowed: docker\)$`},
		{"unknown backend", tenants, session.Placement{Backend: "firecracker"}, `placement\.backend: "firecracker"`},
		{"default image by name", tenants, dock(session.Spec{Image: "rath-sandbox:busybox"}), ""},
		{"other image", tenants, dock(session.Spec{Image: "alpine"}), `^placement\.spec\.image: "alpine" is not allowed .*\(allowed: rath-sandbox:busybox\)$`},
		{"entrypoint", tenants, dock(session.Spec{Entrypoint: []string{"sh"}}), `^placement\.spec\.entrypoint: `},
		{"network none", tenants, dock(session.Spec{Network: "none"}), ""},
		{"egress not granted", tenants, dock(session.Spec{Network: "egress"}), `^placement\.spec\.network: "egress" .*\(allowed: none\)$`},
		{"host", tenants, dock(session.Spec{Network: "host"}), `^placement\.spec\.network: "host" is not allowed by the operator's sandbox policy \(allowed: none\)$`},
		{"named network", egress, dock(session.Spec{Network: "rath-egress"}), `^placement\.spec\.network: "rath-egress" .*\(allowed: none, egress\)$`},
		{"bridge", egress, dock(session.Spec{Network: "bridge"}), `placement\.spec\.network: "bridge"`},
		{"egress granted", egress, dock(session.Spec{Network: "egress"}), ""},
		{"listed image", egress, dock(session.Spec{Image: "tools:1"}), ""},
		{"entrypoint allowed", egress, dock(session.Spec{Entrypoint: []string{"sh"}}), ""},
		{"env name", tenants, dock(session.Spec{Env: map[string]string{"A=B": "x"}}), `^placement\.spec\.env: name "A=B"`},
		{"env value", tenants, dock(session.Spec{Env: map[string]string{"A": strings.Repeat("x", policy.MaxEnvValueBytes+1)}}), `^placement\.spec\.env\.A: `},
		{"timeout", tenants, dock(session.Spec{TimeoutSeconds: -1}), `^placement\.spec\.timeout_seconds: `},
		{"dev local", dev, session.Placement{}, ""},
		{"dev any image", dev, dock(session.Spec{Image: "alpine", Entrypoint: []string{"sh"}, Network: "egress"}), ""},
		{"dev named network", dev, dock(session.Spec{Network: "rath-other"}), `placement\.spec\.network`},
		{"no backends", none, session.Placement{}, `^placement\.backend: unplaced sessions have no default backend`},
		{"nil policy", nil, session.Placement{}, `placement\.backend: no sandbox policy`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := check(c.p, c.pl)
			if c.want == "" && got != "" || c.want != "" && !regexp.MustCompile(c.want).MatchString(got) {
				t.Fatalf("Check(%+v) = %q, want %q", c.pl, got, c.want)
			}
		})
	}
}

func TestCheckReturnsBackend(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		p    *policy.Policy
		want string
	}{{policy.Default(false, ""), "docker"}, {policy.Default(true, ""), "local"}} {
		if got, err := c.p.Check(session.Placement{}); err != nil || got != c.want {
			t.Errorf("unplaced: %q, %v; want %q", got, err, c.want)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := policy.Load(filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: %v", err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte("backends: [docker]\n#"+strings.Repeat("x", policy.MaxPolicyBytes)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := policy.Load(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized file: %v", err)
	}
}

// FuzzParse: any input either parses into a policy whose checks never
// panic and that allows only backends it lists, or fails with ErrInvalid.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"backends: [docker]\n",
		"backends: [local, docker]\ndefault: local\ndocker: {images: ['*'], allow_entrypoint: true, egress_network: bridge}\n",
		"backends: []\n",
		"backends: [docker]\ndocker:\n  images: [a:1]\n  cpus: 0.5\n  memory_bytes: 8388608\n  pids: 10\n  disk_bytes: 1\n",
		"backends: [docker]\nbogus: 1\n",
		"- a\n- b\n",
		"{",
	} {
		f.Add([]byte(s))
	}
	placements := []session.Placement{
		{}, {Backend: "local"}, {Backend: "docker"},
		{Backend: "docker", Spec: session.Spec{Image: "a:1", Network: "egress", Entrypoint: []string{"x"}}},
		{Backend: "docker", Spec: session.Spec{Network: "host"}},
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := policy.Parse(data)
		if err != nil {
			if !errors.Is(err, policy.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		for _, pl := range placements {
			b, err := p.Check(pl)
			if err == nil && !p.Allows(b) {
				t.Fatalf("Check(%+v) allowed backend %q, which the policy does not list (%v)", pl, b, p.Backends)
			}
			if err == nil && pl.Spec.Network == "host" {
				t.Fatalf("Check allowed network host")
			}
		}
	})
}
