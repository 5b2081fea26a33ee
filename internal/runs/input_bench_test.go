package runs

import (
	"context"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/cpustat"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/pgstore"
)

// BenchmarkStartAndReadInput: a worker's step start and the read of its
// input (a new root, not in the worker's cache), one after the other
// (separate: the start, then the graph's read in a round trip of its own)
// or together (with-start: StartStepReadingInput, the cache seeded, the
// graph's read served from it). It reports the Postgres backends' CPU an
// operation (pg-µs/op) beside the wall time.
func BenchmarkStartAndReadInput(b *testing.B) {
	for _, mode := range []string{"separate", "with-start"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			url, conn := migratedPG(b)
			s, _ := openRunStoreAt(b, url)
			writer, reader := openGraph(b, url), openGraph(b, url)
			steps := make([]string, b.N+1) // the first warms the connections up
			for i := range steps {
				in, err := session.FromUserMessage(ctx, writer, "a message to read")
				if err != nil {
					b.Fatal(err)
				}
				steps[i] = createRun(b, s, in.ID(), 1, nil).Steps[0].ID
			}
			backends := func() time.Duration {
				d, ok := cpustat.Backends(ctx, conn)
				if !ok {
					b.Skip("the backends' CPU cannot be read (Postgres not local)")
				}
				return d
			}
			var cpu0 time.Duration
			for i, id := range steps {
				if i == 1 {
					b.ResetTimer()
					cpu0 = backends()
				}
				var st Step
				var err error
				if mode == "separate" {
					st, err = s.StartStep(ctx, id, "w")
				} else {
					var in pgstore.InputScan
					st, err = s.StartStepReadingInput(ctx, id, "w", &in)
					if err == nil {
						_, err = reader.SeedInput(&in, st.RedactionEpoch)
					}
				}
				if err != nil {
					b.Fatal(err)
				}
				if _, _, err := reader.VersionAndTranscriptAt(ctx, st.Input, st.RedactionEpoch); err != nil {
					b.Fatal(err)
				}
			}
			cpu := backends() - cpu0
			b.StopTimer()
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "pg-µs/op")
		})
	}
}
