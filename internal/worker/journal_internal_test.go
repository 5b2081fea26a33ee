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

// TestStepJournalEmpty: only a first attempt that recorded nothing may
// commit without pruning its journal.
func TestStepJournalEmpty(t *testing.T) {
	var nilJournal *stepJournal
	j := &stepJournal{}
	for _, c := range []struct {
		j       *stepJournal
		attempt int
		wrote   bool
		want    bool
	}{{j, 1, false, true}, {j, 1, true, false}, {j, 2, false, false}, {nilJournal, 1, false, false}} {
		if c.j != nil {
			c.j.wrote.Store(c.wrote)
		}
		if got := c.j.empty(c.attempt); got != c.want {
			t.Errorf("attempt %d, wrote %v, journal %v: empty = %v, want %v", c.attempt, c.wrote, c.j != nil, got, c.want)
		}
	}
}
