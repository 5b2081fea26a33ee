package storetest

import (
	"context"
	"testing"

	"github.com/rath-run/rath/pkg/session"
)

// Prepare builds, without committing, the step version that extending s
// with one chunk c under key would commit: for tests that hand a sealed
// version to a store's own commit paths (PutWith, a step's commit).
func Prepare(t testing.TB, s session.Session, key string, c session.Chunk) *session.Version {
	t.Helper()
	var v *session.Version
	capture := captureGraph{Graph: s.Graph(), put: func(x *session.Version) { v = x }}
	if _, err := session.Wrap(capture, s.Version()).Extend(context.Background(), session.Extension{
		Op: session.OpStep, Chunks: []session.Chunk{c}, Key: key,
	}); err != nil {
		t.Fatal(err)
	}
	return v
}

// captureGraph records the version put into it instead of committing it.
type captureGraph struct {
	session.Graph
	put func(*session.Version)
}

func (g captureGraph) Put(_ context.Context, v *session.Version) (*session.Version, error) {
	g.put(v)
	return v, nil
}
