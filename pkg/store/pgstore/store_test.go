package pgstore_test

import (
	"testing"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/store/pgstore"
	"github.com/rath-run/rath/pkg/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store { return openStore(t, pgstore.Options{}) })
}

func TestProperties(t *testing.T) {
	t.Parallel()
	storetest.RunProperties(t, func(t *testing.T) store.Store { return openStore(t, pgstore.Options{}) })
}

func TestMergeProperties(t *testing.T) {
	t.Parallel()
	storetest.RunMergeProperties(t, func(t *testing.T) session.Graph { return openStore(t, pgstore.Options{}) })
}
