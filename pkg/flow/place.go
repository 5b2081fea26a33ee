package flow

import (
	"context"
	"fmt"

	"github.com/rath-run/rath/pkg/session"
)

// Placement is the placement an agent step asks for with its spec's
// sandbox block, and whether it asks for one. Selectors and compressors
// run no tools: they never ask.
func (c Call) Placement() (session.Placement, bool) {
	if c.Kind != KindAgent || c.Agent.Sandbox == nil {
		return session.Placement{}, false
	}
	return c.Agent.Sandbox.Placement(), true
}

// PlaceKey is the key of the version (op place) that moves step stepID's
// input onto the sandbox its agent asks for.
func PlaceKey(stepID string) string { return "place/" + stepID }

// Placed returns the input step stepID forwards: in itself when call asks
// for no placement ([Call.Placement]) or in is placed there already (same
// backend, image, network and timeout), else a version with op place
// committed under [PlaceKey] (a re-executed step gets the same version
// back; the workspace snapshot travels). Both runtimes call it before a
// step, so the step's tools run in the sandbox the agent names and the
// lineage shows the move. It checks no policy: the coordinator checks the
// operator's before it calls it.
func Placed(ctx context.Context, call Call, in session.Session, stepID string) (session.Session, error) {
	p, ok := call.Placement()
	if !ok || SamePlace(in.Placement(), p) {
		return in, nil
	}
	out, err := in.ToKeyed(ctx, p, PlaceKey(stepID))
	if err != nil {
		return session.Session{}, fmt.Errorf("step %s: place the input on %s: %w", stepID, p.Backend, err)
	}
	return out, nil
}

// SamePlace reports whether a session placed at cur is already where p
// asks: the same backend, image, network and timeout (the snapshot is the
// session's own, and travels).
func SamePlace(cur, p session.Placement) bool {
	return cur.Backend == p.Backend && cur.Spec.Image == p.Spec.Image && cur.Spec.Network == p.Spec.Network &&
		cur.Spec.TimeoutSeconds == p.Spec.TimeoutSeconds
}
