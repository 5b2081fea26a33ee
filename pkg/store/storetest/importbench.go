package storetest

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/cpustat"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// ImportBenchVersions is the size of the file BenchImport imports.
const ImportBenchVersions = 20_000

// BenchImport measures [session.Import] of a 20,000-version session JSONL
// file (a chain of appends of one message each, a fork and a merge every
// 1,000) into an empty store from open, one transaction per import. Each
// iteration imports into a new store, opened outside the timer: in one
// transaction (Bulk), and one version at a time (PerVersion). It reports
// versions/s, and versions per CPU second (this process's CPU, plus that of
// the store's server processes when server reads it; nil: in-process
// store), which on a loaded machine shows what an idle one would do.
func BenchImport(b *testing.B, open func(b *testing.B) store.Store, server func(st store.Store) (time.Duration, bool)) {
	ctx := ctxFor(b)
	g := session.NewMemoryGraph()
	s := must(session.New(ctx, g, session.System("import benchmark")))(b)
	for n := 1; n < ImportBenchVersions; {
		var err error
		if n%1000 == 998 {
			n += 3
			side := must(s.Fork(ctx))(b)
			side = must(side.Append(ctx, session.User("aside")))(b)
			s, err = s.Merge(ctx, side)
		} else {
			n++
			s, err = s.Append(ctx, session.User(fmt.Sprintf("message %d of a long imported session", n)))
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := session.Export(ctx, g, s.ID(), &buf); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	n := len(g.Versions())
	b.Run("Bulk", func(b *testing.B) { benchImport(b, data, n, s.ID(), open, server, false) })
	// PerVersion is the path every import took before Bulk: one Put (one
	// transaction) per version.
	b.Run("PerVersion", func(b *testing.B) { benchImport(b, data, n, s.ID(), open, server, true) })
}

// graphOnly hides a store's Bulk, so session.Import puts one version at a
// time.
type graphOnly struct{ session.Graph }

func benchImport(b *testing.B, data []byte, n int, head session.ID, open func(b *testing.B) store.Store,
	server func(st store.Store) (time.Duration, bool), perVersion bool) {
	ctx := ctxFor(b)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	var took, cpu time.Duration
	cpuOK := true
	for range b.N {
		b.StopTimer()
		st := open(b)
		cpuAt := func() (time.Duration, bool) {
			self, ok := cpustat.Self()
			if server != nil {
				srv, ok2 := server(st)
				self, ok = self+srv, ok && ok2
			}
			return self, ok
		}
		cpu0, ok0 := cpuAt()
		b.StartTimer()
		start := time.Now()
		var into session.Graph = st
		if perVersion {
			into = graphOnly{st}
		}
		got, err := session.Import(ctx, into, bytes.NewReader(data))
		took += time.Since(start)
		b.StopTimer()
		cpu1, ok1 := cpuAt()
		cpu += cpu1 - cpu0
		cpuOK = cpuOK && ok0 && ok1
		b.StartTimer()
		if err != nil {
			b.Fatal(err)
		}
		if got.ID() != head {
			b.Fatalf("imported head %s, want %s", got.ID(), head)
		}
	}
	b.ReportMetric(float64(n*b.N)/took.Seconds(), "versions/s")
	if cpuOK && cpu > 0 {
		b.ReportMetric(float64(n*b.N)/cpu.Seconds(), "versions/cpu-s")
	}
}
