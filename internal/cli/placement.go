package cli

import (
	"fmt"
	"strings"

	"github.com/rath-run/rath/pkg/session"
)

// parseSandbox reads the --sandbox flag of rathctl run: "local", "docker"
// or "docker:IMAGE". The empty string means no placement (the operator's
// default backend).
func parseSandbox(v string) (session.Placement, error) {
	if v == "" {
		return session.Placement{}, nil
	}
	backend, image, hasImage := strings.Cut(v, ":")
	p := session.Placement{Backend: backend, Spec: session.Spec{Image: image}}
	switch {
	case backend == "local" && hasImage:
		return session.Placement{}, fmt.Errorf("--sandbox: local takes no image (%q)", v)
	case backend == "docker" && hasImage && image == "":
		return session.Placement{}, fmt.Errorf("--sandbox: docker: needs an image after the colon (%q)", v)
	}
	if err := validPlacement(p); err != nil {
		return session.Placement{}, fmt.Errorf("--sandbox: %w", err)
	}
	return p, nil
}

// validPlacement checks what the CLI can know about a placement before it
// is sent: the backend and network are known words. Whether the operator
// allows it is the coordinator's answer (its sandbox policy).
func validPlacement(p session.Placement) error {
	switch p.Backend {
	case "local", "docker":
	case "":
		return fmt.Errorf("backend: required (local or docker)")
	default:
		return fmt.Errorf("backend: %q is not a sandbox backend (local or docker)", p.Backend)
	}
	switch p.Spec.Network {
	case "", "none", "egress":
	default:
		return fmt.Errorf("network: %q is not none or egress", p.Spec.Network)
	}
	if p.Backend == "local" && (p.Spec.Image != "" || p.Spec.Network != "") {
		return fmt.Errorf("backend: local takes no image or network")
	}
	return nil
}
