package sqlitestore_test

import (
	"testing"

	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/store/sqlitestore"
	"github.com/rath-run/rath/pkg/store/storetest"
)

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Store { return openFile(b, sqlitestore.Options{}) })
}
