package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/cpustat"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/store/pgstore"
	"github.com/rath-run/rath/pkg/store/storetest"
)

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Store { return openStore(b, pgstore.Options{}) })
}

// BenchmarkImport: go test -run '^$' -bench BenchmarkImport -benchtime 2x ./pkg/store/pgstore/
func BenchmarkImport(b *testing.B) {
	storetest.BenchImport(b, func(b *testing.B) store.Store { return openStore(b, pgstore.Options{}) }, backendCPU)
}

// backendCPU sums the CPU time of the Postgres server processes serving
// st's database, read from /proc: the benchmark runs on the database's
// host.
func backendCPU(st store.Store) (time.Duration, bool) {
	return cpustat.Backends(context.Background(), st.(*pgstore.Store).Pool())
}
