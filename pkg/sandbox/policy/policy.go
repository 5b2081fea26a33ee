// Package policy is the operator's sandbox policy: which sandbox backends a
// tenant's sessions may use and, for docker, which images, entrypoints,
// networks and resource limits.
//
// A placement (session.Placement: backend and spec) is tenant input: it
// arrives in POST /v1/versions, session imports and the sessions a run
// forwards. It never chooses host resources by itself. The operator writes
// a [Policy] (YAML, loaded by [Load] from --sandbox-policy or
// RATH_SANDBOX_POLICY) and both the coordinator and the worker enforce it:
// the coordinator refuses a placement the policy does not allow when it
// enters through the API, and the worker checks it again before it opens a
// sandbox, failing the step permanently. [Policy.Check] is that one check;
// its errors wrap [ErrNotAllowed] and name the field
// ("placement.spec.network: …").
//
// # Defaults
//
// Without a file, [Default] picks by store: a Postgres store can serve many
// tenants, so only docker is allowed, unplaced sessions run on docker,
// images are the configured default only, no entrypoint, no network. The
// embedded SQLite store (rathctl dev) serves one user, who is the operator:
// local and docker are allowed, unplaced sessions run on local, any image
// and entrypoint, and egress on Docker's bridge network.
//
// # File
//
//	backends: [docker]          # required; [] allows no sandbox at all
//	default: docker             # unplaced sessions; default docker if allowed, else the first
//	docker:
//	  images: [rath-sandbox:busybox, my-tools:1]   # "*" allows any image
//	  default_image: rath-sandbox:busybox          # default: the first image
//	  allow_entrypoint: false
//	  egress_network: ""        # a Docker network the operator grants; "" grants none
//	  cpus: 1
//	  memory_bytes: 268435456
//	  pids: 128
//	  disk_bytes: 1073741824    # per-workspace disk quota
//
// A tenant's spec may ask only for network "none" (or nothing) or "egress",
// which means the operator's egress_network; it never names a Docker
// network itself.
package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/rath-run/rath/pkg/session"
)

// Backend names a policy knows.
const (
	Local  = "local"
	Docker = "docker"
)

// AnyImage in DockerPolicy.Images allows every image.
const AnyImage = "*"

// Limits on what a spec may carry, whatever the policy.
const (
	MaxEnv            = 64
	MaxEnvValueBytes  = 32 << 10
	MaxTimeoutSeconds = 24 * 60 * 60
	// MaxPolicyBytes bounds a policy file.
	MaxPolicyBytes = 1 << 20
)

// ErrNotAllowed marks a placement the operator's policy refuses. Test with
// errors.Is; the message names the field.
var ErrNotAllowed = errors.New("not allowed by the operator's sandbox policy")

// ErrInvalid marks a policy file that does not decode or validate.
var ErrInvalid = errors.New("sandbox policy: invalid")

// Policy is the operator's sandbox policy. Build it with [Parse], [Load] or
// [Default]; the zero Policy allows nothing. A Policy is read-only once
// built and safe for concurrent use.
type Policy struct {
	// Backends lists the backends tenants' sessions may use. Required in a
	// file; [] allows none (steps with tools then fail).
	Backends []string `yaml:"backends"`
	// Default is the backend of an unplaced session. Default: docker when
	// allowed, else the first of Backends, else none (an unplaced session's
	// tools are refused).
	Default string `yaml:"default"`
	// Docker configures the docker backend.
	Docker DockerPolicy `yaml:"docker"`
}

// DockerPolicy is what a docker sandbox may be.
type DockerPolicy struct {
	// Images lists the images a spec may name; [AnyImage] allows any.
	// Default: DefaultImage only.
	Images []string `yaml:"images"`
	// DefaultImage is the image of a spec that names none. Default: the
	// first of Images, else the backend's default (RATH_SANDBOX_IMAGE,
	// else rath-sandbox:busybox).
	DefaultImage string `yaml:"default_image"`
	// AllowEntrypoint lets a spec replace the container's keep-alive
	// command. Default false.
	AllowEntrypoint bool `yaml:"allow_entrypoint"`
	// EgressNetwork is the Docker network a spec asking for "egress" joins.
	// Default "": no egress is granted; every sandbox has network "none".
	EgressNetwork string `yaml:"egress_network"`
	// CPUs caps a container's CPU (1 = one CPU). 0: the backend's default.
	CPUs float64 `yaml:"cpus"`
	// MemoryBytes caps a container's memory (no swap). 0: the backend's
	// default.
	MemoryBytes int64 `yaml:"memory_bytes"`
	// Pids caps a container's processes. 0: the backend's default.
	Pids int64 `yaml:"pids"`
	// DiskBytes is the per-workspace disk quota the backends enforce. 0:
	// the backend's default.
	DiskBytes int64 `yaml:"disk_bytes"`
}

// Default returns the policy used without a file: for a store that serves
// one user (embedded is true: rathctl dev's SQLite store), local and
// docker with any image, entrypoints and egress on Docker's "bridge"
// network, unplaced sessions on local; for any other store, docker only,
// with image (the backend's default image when empty) and no network,
// unplaced sessions on docker.
func Default(embedded bool, image string) *Policy {
	if embedded {
		return &Policy{
			Backends: []string{Local, Docker},
			Default:  Local,
			Docker:   DockerPolicy{Images: []string{AnyImage}, DefaultImage: image, AllowEntrypoint: true, EgressNetwork: "bridge"},
		}
	}
	return (&Policy{Backends: []string{Docker}, Default: Docker}).WithImage(image)
}

// WithImage returns p with image as its docker default and only allowed
// image when p names none (a file without docker.images, or Default), and
// p itself otherwise.
func (p *Policy) WithImage(image string) *Policy {
	if image == "" || len(p.Docker.Images) > 0 || p.Docker.DefaultImage != "" {
		return p
	}
	cp := *p
	cp.Docker.Images = []string{image}
	cp.Docker.DefaultImage = image
	return &cp
}

// Load reads and parses the policy file at path.
func Load(path string) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("sandbox policy: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxPolicyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("sandbox policy %s: %w", path, err)
	}
	p, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// Parse decodes a policy file strictly (an unknown field is an error naming
// its line) and validates it; errors wrap [ErrInvalid]. image fills
// DefaultImage and Images when the file names no image.
func Parse(data []byte) (*Policy, error) {
	if len(data) > MaxPolicyBytes {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrInvalid, MaxPolicyBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var p Policy
	if err := dec.Decode(&p); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: empty file: backends is required", ErrInvalid)
		}
		// yaml's "unmarshal errors:\n  line 3: …" on one line.
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		msg = strings.ReplaceAll(strings.TrimPrefix(msg, "unmarshal errors:\n  "), "\n  ", "; ")
		return nil, fmt.Errorf("%w: %s", ErrInvalid, msg)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: more than one YAML document", ErrInvalid)
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

var (
	imageRE   = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._/:@+-]{0,254}$`)
	networkRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$`)
	envRE     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// validate checks a decoded policy and fills its defaults.
func (p *Policy) validate() error {
	if p.Backends == nil {
		return invalid("backends: required (the sandbox backends tenants may use: docker, local; [] for none)")
	}
	for i, b := range p.Backends {
		if b != Local && b != Docker {
			return invalid("backends[%d]: %q: want docker or local", i, b)
		}
		if slices.Index(p.Backends, b) != i {
			return invalid("backends[%d]: %q listed twice", i, b)
		}
	}
	switch {
	case p.Default == "" && slices.Contains(p.Backends, Docker):
		p.Default = Docker
	case p.Default == "" && len(p.Backends) > 0:
		p.Default = p.Backends[0]
	case p.Default != "" && !slices.Contains(p.Backends, p.Default):
		return invalid("default: %q is not in backends (%s)", p.Default, strings.Join(p.Backends, ", "))
	}
	d := &p.Docker
	for i, im := range d.Images {
		if im != AnyImage && !imageRE.MatchString(im) {
			return invalid("docker.images[%d]: %q: not an image reference", i, im)
		}
	}
	if d.DefaultImage != "" {
		if !imageRE.MatchString(d.DefaultImage) {
			return invalid("docker.default_image: %q: not an image reference", d.DefaultImage)
		}
		if len(d.Images) > 0 && !d.imageAllowed(d.DefaultImage) {
			return invalid("docker.default_image: %q is not in docker.images", d.DefaultImage)
		}
	} else if len(d.Images) > 0 && d.Images[0] != AnyImage {
		d.DefaultImage = d.Images[0]
	}
	if n := d.EgressNetwork; n != "" {
		if n == "host" || n == "none" || strings.HasPrefix(n, "container:") || !networkRE.MatchString(n) {
			return invalid("docker.egress_network: %q: want the name of a Docker network (not host, none or container:…)", n)
		}
	}
	switch {
	case math.IsNaN(d.CPUs) || d.CPUs < 0 || d.CPUs > 1024:
		return invalid("docker.cpus: %v: want 0 (the default) to 1024", d.CPUs)
	case d.MemoryBytes != 0 && (d.MemoryBytes < 6<<20 || d.MemoryBytes > 1<<40):
		return invalid("docker.memory_bytes: %d: want 0 (the default) or 6 MiB to 1 TiB", d.MemoryBytes)
	case d.Pids < 0 || d.Pids > 1<<22:
		return invalid("docker.pids: %d: want 0 (the default) to %d", d.Pids, 1<<22)
	case d.DiskBytes < 0:
		return invalid("docker.disk_bytes: %d: want 0 (the default) or more", d.DiskBytes)
	}
	return nil
}

func (d *DockerPolicy) imageAllowed(im string) bool {
	return slices.Contains(d.Images, AnyImage) || slices.Contains(d.Images, im)
}

// Error is a placement the policy refuses: Field is the placement's JSON
// path ("placement.spec.network"). It wraps [ErrNotAllowed].
type Error struct {
	Field string
	Msg   string
}

func (e *Error) Error() string { return e.Field + ": " + e.Msg }

// Unwrap returns [ErrNotAllowed].
func (e *Error) Unwrap() error { return ErrNotAllowed }

func refuse(field, format string, args ...any) error {
	return &Error{Field: field, Msg: fmt.Sprintf(format, args...)}
}

func quoteAll(ss []string) string {
	if len(ss) == 0 {
		return "none"
	}
	return strings.Join(ss, ", ")
}

// Check reports whether the policy allows a session placed at pl to run
// tools, and returns the backend they run on: pl.Backend, or the policy's
// default for an unplaced session. A nil Policy allows nothing. The error
// is an [*Error] naming the field.
func (p *Policy) Check(pl session.Placement) (string, error) {
	if p == nil {
		return "", refuse("placement.backend", "no sandbox policy is configured")
	}
	backend := pl.Backend
	if backend == "" {
		if p.Default == "" {
			return "", refuse("placement.backend", "unplaced sessions have no default backend under the operator's sandbox policy (allowed: %s); place the session on one", quoteAll(p.Backends))
		}
		backend = p.Default
	}
	if !slices.Contains(p.Backends, backend) {
		return "", refuse("placement.backend", "%q is not allowed by the operator's sandbox policy (allowed: %s)", backend, quoteAll(p.Backends))
	}
	if err := p.checkSpec(backend, pl.Spec); err != nil {
		return "", err
	}
	return backend, nil
}

func (p *Policy) checkSpec(backend string, s session.Spec) error {
	if len(s.Env) > MaxEnv {
		return refuse("placement.spec.env", "%d variables: at most %d are allowed by the operator's sandbox policy", len(s.Env), MaxEnv)
	}
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		if !envRE.MatchString(k) {
			return refuse("placement.spec.env", "name %q is not allowed by the operator's sandbox policy (want [A-Za-z_][A-Za-z0-9_]*, at most 128 characters)", k)
		}
		if len(s.Env[k]) > MaxEnvValueBytes {
			return refuse("placement.spec.env."+k, "value of %d bytes: at most %d are allowed by the operator's sandbox policy", len(s.Env[k]), MaxEnvValueBytes)
		}
	}
	if t := s.TimeoutSeconds; math.IsNaN(t) || t < 0 || t > MaxTimeoutSeconds {
		return refuse("placement.spec.timeout_seconds", "%v is not allowed by the operator's sandbox policy (want 0 to %d)", t, MaxTimeoutSeconds)
	}
	if backend != Docker {
		return nil
	}
	d := &p.Docker
	if s.Image != "" && !d.imageAllowed(s.Image) {
		allowed := d.Images
		if len(allowed) == 0 && d.DefaultImage != "" {
			allowed = []string{d.DefaultImage}
		}
		if len(allowed) == 0 {
			allowed = []string{"the default image"}
		}
		return refuse("placement.spec.image", "%q is not allowed by the operator's sandbox policy (allowed: %s)", s.Image, quoteAll(allowed))
	}
	if len(s.Entrypoint) > 0 && !d.AllowEntrypoint {
		return refuse("placement.spec.entrypoint", "setting an entrypoint is not allowed by the operator's sandbox policy")
	}
	switch s.Network {
	case "", "none":
	case "egress":
		if d.EgressNetwork == "" {
			return refuse("placement.spec.network", "\"egress\" is not allowed by the operator's sandbox policy: the operator grants no egress network (allowed: none)")
		}
	default:
		allowed := "none"
		if d.EgressNetwork != "" {
			allowed = "none, egress"
		}
		return refuse("placement.spec.network", "%q is not allowed by the operator's sandbox policy (allowed: %s)", s.Network, allowed)
	}
	return nil
}

// Allows reports whether backend is one the policy lets sessions use.
func (p *Policy) Allows(backend string) bool {
	return p != nil && slices.Contains(p.Backends, backend)
}
