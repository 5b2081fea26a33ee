package memory

import (
	"math"
	"sort"
	"strings"
	"unicode"
)

// BM25 parameters, OpenRath's.
const (
	K1 = 1.5
	B  = 0.75
	// SnippetRunes is where a hit's snippet is cut.
	SnippetRunes = 200
)

// Tokenize splits s as OpenRath does: runs of [A-Za-z0-9], lower-cased.
// Every other character (non-ASCII letters included) separates tokens.
func Tokenize(s string) []string {
	var out []string
	start := -1
	for i := 0; i <= len(s); i++ {
		alnum := false
		if i < len(s) {
			c := s[i]
			alnum = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		}
		if alnum {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			out = append(out, strings.ToLower(s[start:i]))
			start = -1
		}
	}
	return out
}

// Snippet returns OpenRath's snippet of text: the first SnippetRunes
// characters, right-stripped, then "...", when text is longer.
func Snippet(text string) string {
	n := 0
	for i := range text {
		if n == SnippetRunes {
			return strings.TrimRightFunc(text[:i], unicode.IsSpace) + "..."
		}
		n++
	}
	return text
}

// Posting is one (term, document) entry of an inverted index.
type Posting struct {
	URI string
	TF  int
	DL  int
}

// Corpus is what BM25 needs of the documents in scope.
type Corpus struct {
	N     int   // documents
	SumDL int64 // Σ document lengths
}

// Score computes BM25 scores for the documents in postings. terms are the
// query's tokens in query order (repeats count); postings maps each
// distinct term to postings in scope; df gives each term's document
// frequency in scope, or nil when the lists are complete (df = list
// length). A backend that reads some lists only partly (for the documents
// it scores) passes df. The arithmetic follows OpenRath's order of
// evaluation so the bits match.
func Score(c Corpus, terms []string, postings map[string][]Posting, df map[string]int) map[string]float64 {
	scores := make(map[string]float64)
	if c.N == 0 {
		return scores
	}
	n := float64(c.N)
	avgdl := float64(c.SumDL) / n
	type entry struct{ tf, dl int }
	idx := make(map[string]map[string]entry, len(postings))
	idf := make(map[string]float64, len(postings))
	for t, ps := range postings {
		m := make(map[string]entry, len(ps))
		for _, p := range ps {
			m[p.URI] = entry{p.TF, p.DL}
		}
		idx[t] = m
		d := float64(len(ps))
		if df != nil {
			d = float64(df[t])
		}
		idf[t] = math.Log(1 + (n-d+0.5)/(d+0.5))
	}
	// Candidates, each scored over the query terms in query order.
	for _, ps := range postings {
		for _, p := range ps {
			if _, done := scores[p.URI]; done {
				continue
			}
			s := 0.0
			for _, t := range terms {
				e, ok := idx[t][p.URI]
				if !ok || e.tf == 0 {
					continue
				}
				tf := float64(e.tf)
				denom := tf + K1*(1-B+B*(float64(e.dl)/avgdl))
				s += idf[t] * (tf * (K1 + 1)) / denom
			}
			scores[p.URI] = s
		}
	}
	return scores
}

// Rank orders scored documents by score descending, ties by URI (OpenRath's
// sorted walk), and keeps at most k.
func Rank(scores map[string]float64, k int) []Hit {
	hits := make([]Hit, 0, len(scores))
	for u, s := range scores {
		hits = append(hits, Hit{URI: u, Score: s})
	}
	sort.Slice(hits, func(i, j int) bool {
		if hits[i].Score != hits[j].Score {
			return hits[i].Score > hits[j].Score
		}
		return hits[i].URI < hits[j].URI
	})
	if len(hits) > k {
		hits = hits[:k]
	}
	return hits
}

// Doc is a document for [RankDocs].
type Doc struct {
	URI  string
	Text string
}

// RankDocs ranks docs for query by scanning them all: the reference the
// indexed backends are checked against. Zero-score documents fill the top
// k in URI order, as in OpenRath.
func RankDocs(docs []Doc, query string, k int) []Hit {
	terms := Tokenize(query)
	want := make(map[string]bool, len(terms))
	for _, t := range terms {
		want[t] = true
	}
	var c Corpus
	postings := make(map[string][]Posting)
	text := make(map[string]string, len(docs))
	for _, d := range docs {
		toks := Tokenize(d.Text)
		c.N++
		c.SumDL += int64(len(toks))
		text[d.URI] = d.Text
		tf := map[string]int{}
		for _, t := range toks {
			if want[t] {
				tf[t]++
			}
		}
		for t, n := range tf {
			postings[t] = append(postings[t], Posting{URI: d.URI, TF: n, DL: len(toks)})
		}
	}
	scores := Score(c, terms, postings, nil)
	for _, d := range docs {
		if _, ok := scores[d.URI]; !ok {
			scores[d.URI] = 0
		}
	}
	hits := Rank(scores, k)
	for i := range hits {
		hits[i].Snippet = Snippet(text[hits[i].URI])
	}
	return hits
}
