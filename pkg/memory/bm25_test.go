package memory_test

import (
	"math"
	"slices"
	"testing"

	"github.com/rath-run/rath/pkg/memory"
	"github.com/rath-run/rath/pkg/memory/memorytest"
)

func TestRankDocsMatchesOpenRath(t *testing.T) {
	cases, err := memorytest.BM25Fixture()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, c := range cases {
		docs := make([]memory.Doc, 0, len(c.Notes))
		for _, n := range c.Notes {
			docs = append(docs, memory.Doc{URI: n.URI, Text: n.Content})
		}
		for _, q := range c.Queries {
			if got := memory.Tokenize(q.Query); !slices.Equal(got, q.QueryTerms) {
				t.Errorf("%s: Tokenize(%q) = %q, OpenRath %q", c.Name, q.Query, got, q.QueryTerms)
			}
			hits := memory.RankDocs(docs, q.Query, q.TopK)
			if len(hits) != len(q.Hits) {
				t.Fatalf("%s %q: %d hits, OpenRath %d", c.Name, q.Query, len(hits), len(q.Hits))
			}
			for i, want := range q.Hits {
				got := hits[i]
				if got.URI != want.URI {
					t.Errorf("%s %q rank %d: %s, OpenRath %s", c.Name, q.Query, i, got.URI, want.URI)
				}
				if math.Abs(got.Score-want.Score) > 1e-9 {
					t.Errorf("%s %q rank %d: score %v, OpenRath %v", c.Name, q.Query, i, got.Score, want.Score)
				}
				if got.Score != want.Score {
					t.Errorf("%s %q rank %d: score %x not bit-exact with OpenRath %s", c.Name, q.Query, i, got.Score, want.ScoreHex)
				}
				if got.Snippet != want.Snippet {
					t.Errorf("%s %q rank %d: snippet %q, OpenRath %q", c.Name, q.Query, i, got.Snippet, want.Snippet)
				}
				checked++
			}
		}
	}
	if checked != 25 {
		t.Fatalf("checked %d hits, the fixture records 25", checked)
	}
}

func TestTokenize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"Night-time EDITOR", []string{"night", "time", "editor"}},
		{"中文 notes", []string{"notes"}},
		{"go1.26 x", []string{"go1", "26", "x"}},
	} {
		if got := memory.Tokenize(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("Tokenize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
