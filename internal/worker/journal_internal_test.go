package worker

import (
	"testing"

	"github.com/rath-run/rath/pkg/session"
)

// TestSandboxNetwork: a sandbox has network when its spec asks for
// egress or its backend is local (or unnamed: the default is local).
func TestSandboxNetwork(t *testing.T) {
	for _, tc := range []struct {
		p    session.Placement
		want bool
	}{
		{session.Placement{Backend: "docker"}, false},
		{session.Placement{Backend: "docker", Spec: session.Spec{Network: "none"}}, false},
		{session.Placement{Backend: "docker", Spec: session.Spec{Network: "egress"}}, true},
		{session.Placement{Backend: "local"}, true},
		{session.Placement{}, true},
	} {
		if got := sandboxNetwork(tc.p); got != tc.want {
			t.Errorf("sandboxNetwork(%+v) = %v, want %v", tc.p, got, tc.want)
		}
	}
}
