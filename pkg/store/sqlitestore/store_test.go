package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/store/sqlitestore"
	"github.com/rath-run/rath/pkg/store/storetest"
)

func openFile(t testing.TB, opts sqlitestore.Options) *sqlitestore.Store {
	t.Helper()
	opts.Migrate = true
	s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "rath.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store { return openFile(t, sqlitestore.Options{}) })
}

func TestConformanceInMemory(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := sqlitestore.Open(context.Background(), sqlitestore.Memory, sqlitestore.Options{Migrate: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestProperties(t *testing.T) {
	t.Parallel()
	storetest.RunProperties(t, func(t *testing.T) store.Store { return openFile(t, sqlitestore.Options{}) })
}

func TestMergeProperties(t *testing.T) {
	t.Parallel()
	storetest.RunMergeProperties(t, func(t *testing.T) session.Graph { return openFile(t, sqlitestore.Options{}) })
}
