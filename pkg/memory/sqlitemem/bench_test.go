package sqlitemem_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/rath-run/rath/pkg/memory/memorytest"
	"github.com/rath-run/rath/pkg/memory/sqlitemem"
)

func openBench(b *testing.B) *sqlitemem.Store {
	s, err := sqlitemem.Open(context.Background(), filepath.Join(b.TempDir(), sqlitemem.DefaultFile))
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
