package memcorpus_test

import (
	"context"
	"slices"
	"testing"

	"github.com/rath-run/rath/pkg/memory"
	"github.com/rath-run/rath/pkg/memory/memcorpus"
	"github.com/rath-run/rath/pkg/memory/sqlitemem"
)

func TestDeterministic(t *testing.T) {
	same := func(a, b []memory.Write) bool {
		return slices.EqualFunc(a, b, func(x, y memory.Write) bool { return x.URI == y.URI && x.Text == y.Text })
	}
	a, b := memcorpus.Corpus(300), memcorpus.Corpus(300)
	if len(a) != 300 || !same(a, b) {
		t.Fatalf("Corpus(300): %d notes, equal twice: %v", len(a), same(a, b))
	}
	if got := memcorpus.Corpus(100); !same(got, a[:100]) {
		t.Fatal("Corpus(100) is not the first 100 of Corpus(300)")
	}
	if q := memcorpus.Queries(5); len(q) != 5 || !slices.Equal(q, memcorpus.Queries(5)) {
		t.Fatalf("Queries(5) = %q: want 5, the same each time", q)
	}
	if len(memcorpus.Corpus(-1)) != 0 || len(memcorpus.Queries(-1)) != 0 {
		t.Fatal("a negative size must give an empty corpus, not a panic")
	}
}

func TestLoad(t *testing.T) {
	ctx := context.Background()
	s, err := sqlitemem.Open(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if err := memcorpus.Load(ctx, s, "ns", memcorpus.Corpus(2500)); err != nil {
		t.Fatal(err)
	}
	hits, err := s.Recall(ctx, "ns", memory.Query{Text: memcorpus.Queries(1)[0], TopK: 8})
	if err != nil || len(hits) != 8 {
		t.Fatalf("recall over the loaded corpus: %d hits, %v", len(hits), err)
	}
}
