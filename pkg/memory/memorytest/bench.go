package memorytest

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"testing"
	"time"

	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/llm/llmtest"
	"github.com/rath-run/rath/pkg/memory"
	"github.com/rath-run/rath/pkg/memory/memcorpus"
)

// Bulk is what a backend offers for loading many items in one transaction.
type Bulk = memcorpus.Bulk

// Corpus is [memcorpus.Corpus].
func Corpus(n int) []memory.Write { return memcorpus.Corpus(n) }

// Queries is [memcorpus.Queries].
func Queries(n int) []string { return memcorpus.Queries(n) }

// Load writes Corpus(n) into namespace ns.
func Load(tb testing.TB, s memory.Store, ns string, n int) {
	tb.Helper()
	if err := memcorpus.Load(context.Background(), s, ns, Corpus(n)); err != nil {
		tb.Fatal(err)
	}
}

// BenchRecall measures recall (top 8) over a store holding n notes and
// reports p50 and p99 latencies in milliseconds.
func BenchRecall(b *testing.B, s memory.Store, n int) {
	ns := fmt.Sprintf("bench-%d", n)
	Load(b, s, ns, n)
	qs := Queries(1000)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		hits, err := s.Recall(ctx, ns, memory.Query{Text: qs[i%len(qs)], TopK: 8})
		lat = append(lat, time.Since(t0))
		if err != nil || len(hits) != 8 {
			b.Fatalf("recall: %d hits, %v", len(hits), err)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
}

// BenchRemember measures single-item remembers (one transaction each)
// into a store already holding 10,000 notes.
func BenchRemember(b *testing.B, s memory.Store) {
	Load(b, s, "bench-remember", 10000)
	ws := Corpus(20000)[10000:]
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		w := ws[i%len(ws)]
		w.URI = fmt.Sprintf("memory://user/new/%09d", i)
		if _, err := s.Remember(ctx, "bench-remember", w); err != nil {
			b.Fatal(err)
		}
	}
}

// hashEmbed is a deterministic 256-dimensional fake embedding: each word
// adds 1 to the axis its FNV hash picks.
func hashEmbed(_, text string) []float32 {
	v := make([]float32, 256)
	for _, w := range memory.Tokenize(text) {
		h := fnv.New32a()
		_, _ = h.Write([]byte(w))
		v[h.Sum32()%256]++
	}
	return v
}

// BenchEmbeddingRecall measures embedding recall ([memory.Semantic], top 8)
// over n notes whose vectors (256 dimensions) are already cached, against
// a local fake /v1/embeddings server: each recall embeds its query over
// HTTP, reads the live items and cached vectors in scope, and ranks by
// cosine. Reports p50 and p99 in milliseconds.
func BenchEmbeddingRecall(b *testing.B, s memory.Store, n int) {
	ns := fmt.Sprintf("bench-embed-%d", n)
	Load(b, s, ns, n)
	cache, ok := s.(memory.VectorCache)
	if !ok {
		b.Fatalf("%T does not implement memory.VectorCache", s)
	}
	srv := llmtest.NewEmbeddingServer(b, hashEmbed)
	e, err := llm.NewEmbedder(llm.OpenAIConfig{BaseURL: srv.URL(), APIKey: "sk-bench", Model: "hash-256"})
	if err != nil {
		b.Fatal(err)
	}
	sem := &memory.Semantic{Store: s, Embedder: e, Cache: cache}
	ctx := context.Background()
	if r, err := sem.RecallInfo(ctx, ns, memory.Query{Text: "warm the cache", TopK: 8}); err != nil || r.Mode != memory.ModeEmbedding {
		b.Fatalf("warm-up: %+v %v", r.Warning, err)
	}
	qs := Queries(1000)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		r, err := sem.RecallInfo(ctx, ns, memory.Query{Text: qs[i%len(qs)], TopK: 8})
		lat = append(lat, time.Since(t0))
		if err != nil || r.Mode != memory.ModeEmbedding || len(r.Hits) != 8 {
			b.Fatalf("recall: %d hits, mode %s %s, %v", len(r.Hits), r.Mode, r.Warning, err)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
}
