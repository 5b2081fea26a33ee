package memorytest

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"
)

// bm25Fixture is OpenRath 1.2.0's own output (fixtures/README: copied from
// the shared OpenRath interop fixtures, memory_bm25.expected.json).
//
//go:embed fixtures/memory_bm25.expected.json
var bm25Fixture []byte

// FixtureCase is one case of OpenRath's BM25 fixture.
type FixtureCase struct {
	Name  string `json:"name"`
	Notes []struct {
		URI     string `json:"uri"`
		Content string `json:"content"`
	} `json:"notes"`
	Queries []struct {
		Query      string   `json:"query"`
		TopK       int      `json:"top_k"`
		QueryTerms []string `json:"query_terms"`
		Hits       []struct {
			URI      string  `json:"uri"`
			Score    float64 `json:"score"`
			ScoreHex string  `json:"score_hex"`
			Snippet  string  `json:"snippet"`
		} `json:"hits"`
	} `json:"queries"`
}

// BM25Fixture returns OpenRath's BM25 cases.
func BM25Fixture() ([]FixtureCase, error) {
	var f struct {
		Cases []FixtureCase `json:"cases"`
	}
	if err := json.Unmarshal(bm25Fixture, &f); err != nil {
		return nil, fmt.Errorf("bm25 fixture: %w", err)
	}
	for _, c := range f.Cases {
		for _, q := range c.Queries {
			for _, h := range q.Hits {
				v, err := strconv.ParseFloat(h.ScoreHex, 64)
				if err != nil {
					return nil, fmt.Errorf("bm25 fixture %s: score_hex %q: %w", c.Name, h.ScoreHex, err)
				}
				if v != h.Score {
					return nil, fmt.Errorf("bm25 fixture %s: score %v != score_hex %s", c.Name, h.Score, h.ScoreHex)
				}
			}
		}
	}
	return f.Cases, nil
}
