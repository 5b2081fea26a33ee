package storetest_test

import (
	"testing"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/storetest"
)

// The in-memory graph is the model, and passes the Graph part of the suite.
func TestMemoryGraphConformance(t *testing.T) {
	t.Parallel()
	storetest.RunGraph(t, func(t *testing.T) session.Graph { return session.NewMemoryGraph() })
}

func TestMemoryGraphMergeProperties(t *testing.T) {
	t.Parallel()
	storetest.RunMergeProperties(t, func(t *testing.T) session.Graph { return session.NewMemoryGraph() })
}
