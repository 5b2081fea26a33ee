package trainset_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/trainset"
)

// fill stores n trajectories (a root with a system and a user message, and
// one step answering it: 2n versions) through PutMany, in batches built in
// a fresh memory graph each, so the test itself holds no more than a batch.
func fill(t testing.TB, st store.Store, n int) {
	ctx := context.Background()
	const batch = 2000
	for done := 0; done < n; done += batch {
		g := session.NewMemoryGraph()
		for i := done; i < min(done+batch, n); i++ {
			root, err := session.New(ctx, g, session.System("you answer arithmetic"), session.User(fmt.Sprintf("what is %d + %d?", i, i)))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := root.Extend(ctx, session.Extension{Op: session.OpStep,
				Chunks:   []session.Chunk{session.Assistant(strconv.Itoa(2 * i))},
				Usage:    session.Usage{PromptTokens: 12, CompletionTokens: 2, TotalTokens: 14},
				Producer: session.Producer{Run: "run-big", Agent: "adder", Model: "scripted"}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.PutMany(ctx, g.Versions()); err != nil {
			t.Fatal(err)
		}
	}
}

type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// TestExportHeapIsFlat exports many trajectories from SQLite and samples
// the live heap (after a GC) at every page: the largest sample of the last
// half of the export may exceed the largest of its first tenth only by a
// constant margin, whatever the count (RATH_TRAINSET_N, default 5,000
// trajectories = 10,000 versions; 50,000 = 100,000 versions for the figure in
// docs/training-data.md).
func TestExportHeapIsFlat(t *testing.T) {
	n := 5_000
	if testing.Short() {
		n = 1_000
	}
	if s := os.Getenv("RATH_TRAINSET_N"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			t.Fatalf("RATH_TRAINSET_N=%q: %v", s, err)
		}
	}
	st, _ := openStore(t)
	start := time.Now()
	fill(t, st, n)
	t.Logf("stored %d versions in %s", 2*n, time.Since(start).Round(time.Millisecond))

	var samples []uint64
	sample := func(trainset.Stats) {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		samples = append(samples, ms.HeapAlloc)
	}
	var out countWriter
	start = time.Now()
	stats, err := trainset.Export(context.Background(), st, trainset.Selector{Run: "run-big"}, trainset.Options{Progress: sample}, &out)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if stats.Written != n {
		t.Fatalf("wrote %d records, want %d (%+v)", stats.Written, n, stats)
	}
	maxOf := func(s []uint64) uint64 {
		m := uint64(0)
		for _, v := range s {
			m = max(m, v)
		}
		return m
	}
	early, late := maxOf(samples[:max(1, len(samples)/10)]), maxOf(samples[len(samples)/2:])
	t.Logf("exported %d records (%d MB) from %d versions in %s (%.0f records/s); heap after GC: early max %.1f MB, late max %.1f MB, %d samples",
		stats.Written, out.n>>20, stats.Scanned, took.Round(time.Millisecond), float64(stats.Written)/took.Seconds(),
		float64(early)/(1<<20), float64(late)/(1<<20), len(samples))
	const margin = 16 << 20
	if late > early+margin {
		t.Fatalf("heap grows with the export: early max %d bytes, late max %d bytes (margin %d)", early, late, margin)
	}
}
