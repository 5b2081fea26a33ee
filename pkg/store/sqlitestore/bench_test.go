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

// BenchmarkImport: go test -run '^$' -bench BenchmarkImport -benchtime 3x ./pkg/store/sqlitestore/
func BenchmarkImport(b *testing.B) {
	storetest.BenchImport(b, func(b *testing.B) store.Store { return openFile(b, sqlitestore.Options{}) }, nil)
}
