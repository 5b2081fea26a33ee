package pgmem_test

import (
	"context"
	"testing"

	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/pkg/memory/memorytest"
	"github.com/rath-run/rath/pkg/memory/pgmem"
)

func openBench(b *testing.B) *pgmem.Store {
	s, err := pgmem.Open(context.Background(), testdb.Postgres(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

func BenchmarkRecall10k(b *testing.B)  { memorytest.BenchRecall(b, openBench(b), 10_000) }
func BenchmarkRecall100k(b *testing.B) { memorytest.BenchRecall(b, openBench(b), 100_000) }
func BenchmarkRemember(b *testing.B)   { memorytest.BenchRemember(b, openBench(b)) }
func BenchmarkEmbeddingRecall10k(b *testing.B) {
	memorytest.BenchEmbeddingRecall(b, openBench(b), 10_000)
}
