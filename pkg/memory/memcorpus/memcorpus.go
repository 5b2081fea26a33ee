// Package memcorpus makes a deterministic synthetic corpus of memory notes
// and recall queries, for benchmarks of memory backends: the conformance
// suite's benchmarks (package memorytest) and `rathctl bench`. It is an
// ordinary package, not a test one, so that programs may link it.
package memcorpus

import (
	"context"
	"fmt"
	"math/rand"
	"strings"

	"github.com/rath-run/rath/pkg/memory"
)

// Bulk is what a backend offers for loading many items in one transaction.
type Bulk interface {
	RememberMany(ctx context.Context, namespace string, ws []memory.Write) error
}

// Corpus makes n deterministic notes over a Zipf-distributed vocabulary of
// 20,000 words (s = 1.1), 8 to 24 words each, like short English notes:
// a few words are very common, most are rare.
func Corpus(n int) []memory.Write {
	r := rand.New(rand.NewSource(1))
	z := rand.NewZipf(r, 1.1, 1, 19999)
	ws := make([]memory.Write, max(n, 0))
	var b strings.Builder
	for i := range ws {
		b.Reset()
		for j := range 8 + r.Intn(17) {
			if j > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "w%d", z.Uint64())
		}
		ws[i] = memory.Write{URI: fmt.Sprintf("memory://user/notes/%07d", i), Text: b.String()}
	}
	return ws
}

// Queries makes n recall queries of 4 words: two content words (Zipf ranks
// 50..2,000) and two drawn from the same Zipf as the notes (so common words
// appear too, as in real questions).
func Queries(n int) []string {
	r := rand.New(rand.NewSource(2))
	z := rand.NewZipf(r, 1.1, 1, 19999)
	qs := make([]string, max(n, 0))
	for i := range qs {
		qs[i] = fmt.Sprintf("w%d w%d w%d w%d", 50+r.Intn(1950), 50+r.Intn(1950), z.Uint64(), z.Uint64())
	}
	return qs
}

// Load writes ws into namespace ns of s, in transactions of up to 2,000
// items when s is a [Bulk], else one Remember each.
func Load(ctx context.Context, s memory.Store, ns string, ws []memory.Write) error {
	bulk, ok := s.(Bulk)
	for len(ws) > 0 {
		k := min(len(ws), 2000)
		if ok {
			if err := bulk.RememberMany(ctx, ns, ws[:k]); err != nil {
				return fmt.Errorf("memcorpus: load %s: %w", ns, err)
			}
		} else {
			for _, w := range ws[:k] {
				if _, err := s.Remember(ctx, ns, w); err != nil {
					return fmt.Errorf("memcorpus: load %s: %s: %w", ns, w.URI, err)
				}
			}
		}
		ws = ws[k:]
	}
	return nil
}
