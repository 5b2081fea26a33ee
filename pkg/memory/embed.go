package memory

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
)

// Embedding recall limits.
const (
	// MaxVectorDim is the largest vector dimension stored or decoded.
	MaxVectorDim = 16384
	// MaxEmbedItems is the most live items in scope that embedding recall
	// ranks (it scores every cached vector in Go); past it, recall uses
	// BM25 and says so in the warning.
	MaxEmbedItems = 20000
	// EmbedTextBytes is how much of an item's text is embedded: its first
	// 8 KiB (about 2,000 tokens, under the 8,191-token input limit of
	// OpenAI's embedding models).
	EmbedTextBytes = 8 << 10
	// embedBatch is how many texts one Embed call carries.
	embedBatch = 256
)

// Recall modes reported in [RecallResult].
const (
	ModeEmbedding = "embedding"
	ModeBM25      = "bm25"
)

// Embedder turns texts into vectors of one dimension (an OpenAI-compatible
// embeddings endpoint: pkg/llm.Embedder). Model names the model; vectors
// are cached per model.
type Embedder interface {
	Model() string
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// StoredVector is an item's cached embedding: TextSHA is [TextSHA] of the
// text embedded, so a rewritten item is embedded again.
type StoredVector struct {
	URI     string
	TextSHA string
	Vec     []float32
}

// VectorCache stores embeddings per (namespace, model, uri); both backends
// implement it (migration 00008_memory_vectors).
type VectorCache interface {
	Vectors(ctx context.Context, namespace, model string) (map[string]StoredVector, error)
	PutVectors(ctx context.Context, namespace, model string, vs []StoredVector) error
}

// RecallResult is a recall with how it was made. Mode is [ModeEmbedding]
// or [ModeBM25]; Warning is set when embedding recall failed and BM25
// answered instead.
type RecallResult struct {
	Hits    []Hit  `json:"hits"`
	Mode    string `json:"mode"`
	Warning string `json:"warning,omitempty"`
}

// Semantic is a Store whose Recall ranks by the cosine similarity of
// embeddings when Embedder is set, and by BM25 (the Store's own Recall)
// otherwise. Every other method is the Store's.
//
// Embedding recall embeds the query and every live item in scope whose
// cached vector is missing or was made from other text (the first
// [EmbedTextBytes] of it), caches the new vectors in Cache, and ranks by
// cosine, ties in URI order; hits carry the item's snippet and writer as
// BM25 hits do. Any failure on that path — the endpoint down, a bad
// reply, mixed dimensions, the cache, more than [MaxEmbedItems] items —
// falls back to BM25: the recall still answers, with the reason in
// [RecallResult.Warning]. Invalid input (namespace, scope, top_k) is an
// error either way.
type Semantic struct {
	Store
	Embedder Embedder
	Cache    VectorCache
}

// Recall returns RecallInfo's hits.
func (s *Semantic) Recall(ctx context.Context, ns string, q Query) ([]Hit, error) {
	r, err := s.RecallInfo(ctx, ns, q)
	return r.Hits, err
}

// RecallInfo recalls and reports the mode used and any fallback warning.
func (s *Semantic) RecallInfo(ctx context.Context, ns string, q Query) (RecallResult, error) {
	if s.Embedder == nil || s.Cache == nil {
		hits, err := s.Store.Recall(ctx, ns, q)
		return RecallResult{Hits: hits, Mode: ModeBM25}, err
	}
	ns, err := CheckNamespace(ns)
	if err != nil {
		return RecallResult{}, err
	}
	if _, err := CheckQuery(&q); err != nil {
		return RecallResult{}, err
	}
	hits, err := s.embedRecall(ctx, ns, q)
	if err == nil {
		return RecallResult{Hits: hits, Mode: ModeEmbedding}, nil
	}
	if ctx.Err() != nil {
		return RecallResult{}, ctx.Err()
	}
	r := RecallResult{Mode: ModeBM25, Warning: fmt.Sprintf("embedding recall (model %q) failed, used BM25: %v", s.Embedder.Model(), err)}
	r.Hits, err = s.Store.Recall(ctx, ns, q)
	return r, err
}

func (s *Semantic) embedRecall(ctx context.Context, ns string, q Query) ([]Hit, error) {
	items, err := s.List(ctx, ns, ListOptions{Scope: q.Scope, Limit: MaxEmbedItems + 1})
	if err != nil {
		return nil, err
	}
	if len(items) > MaxEmbedItems {
		return nil, fmt.Errorf("more than MaxEmbedItems %d items in scope", MaxEmbedItems)
	}
	if len(items) == 0 {
		return nil, nil
	}
	model := s.Embedder.Model()
	cached, err := s.Cache.Vectors(ctx, ns, model)
	if err != nil {
		return nil, fmt.Errorf("read cached vectors: %w", err)
	}
	var stale []StoredVector
	var texts []string
	for _, it := range items {
		text := embedText(it.Text)
		sha := TextSHA(text)
		if v, ok := cached[it.URI]; ok && v.TextSHA == sha {
			continue
		}
		stale = append(stale, StoredVector{URI: it.URI, TextSHA: sha})
		texts = append(texts, text)
	}
	for i := 0; i < len(texts); i += embedBatch {
		j := min(i+embedBatch, len(texts))
		vs, err := s.embed(ctx, texts[i:j])
		if err != nil {
			return nil, err
		}
		for k, v := range vs {
			stale[i+k].Vec = v
			cached[stale[i+k].URI] = stale[i+k]
		}
		if err := s.Cache.PutVectors(ctx, ns, model, stale[i:j]); err != nil {
			return nil, fmt.Errorf("cache vectors: %w", err)
		}
	}
	qv, err := s.embed(ctx, []string{embedText(q.Text)})
	if err != nil {
		return nil, err
	}
	scores := make(map[string]float64, len(items))
	byURI := make(map[string]Item, len(items))
	for _, it := range items {
		v := cached[it.URI].Vec
		if len(v) != len(qv[0]) {
			return nil, fmt.Errorf("item %s has a %d-dimensional vector, the query %d", it.URI, len(v), len(qv[0]))
		}
		scores[it.URI] = Cosine(qv[0], v)
		byURI[it.URI] = it
	}
	hits := Rank(scores, q.TopK)
	for i := range hits {
		it := byURI[hits[i].URI]
		hits[i].Snippet, hits[i].VersionID = Snippet(it.Text), it.VersionID
	}
	return hits, nil
}

// embed calls the Embedder and checks its reply's shape.
func (s *Semantic) embed(ctx context.Context, texts []string) ([][]float32, error) {
	vs, err := s.Embedder.Embed(ctx, texts)
	if err != nil {
		return nil, err
	}
	if len(vs) != len(texts) {
		return nil, fmt.Errorf("embedder returned %d vectors for %d texts", len(vs), len(texts))
	}
	for i, v := range vs {
		if len(v) == 0 || len(v) > MaxVectorDim || len(v) != len(vs[0]) {
			return nil, fmt.Errorf("embedder returned a %d-dimensional vector at %d (want 1..%d, all equal)", len(v), i, MaxVectorDim)
		}
		for j, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return nil, fmt.Errorf("embedder returned %v at component %d of vector %d", x, j, i)
			}
		}
	}
	return vs, nil
}

// embedText is the part of text that is embedded: its first
// EmbedTextBytes, cut at a rune boundary.
func embedText(text string) string {
	if len(text) <= EmbedTextBytes {
		return text
	}
	n := EmbedTextBytes
	for n > 0 && text[n]&0xC0 == 0x80 {
		n--
	}
	return text[:n]
}

// TextSHA is the hex SHA-256 of text, the cache key of its vector.
func TextSHA(text string) string {
	h := sha256.Sum256([]byte(text))
	return hex.EncodeToString(h[:])
}

// Cosine is the cosine similarity of a and b (same length); 0 when either
// is all zeros.
func Cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		dot += x * y
		na += x * x
		nb += y * y
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / (math.Sqrt(na) * math.Sqrt(nb))
}

// EncodeVector is v as little-endian float32s, the stored form.
func EncodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// DecodeVector decodes a stored vector of dim float32s, refusing a length
// that is not 4·dim, a dim outside 1..MaxVectorDim, and NaN or infinite
// components.
func DecodeVector(b []byte, dim int) ([]float32, error) {
	if dim < 1 || dim > MaxVectorDim {
		return nil, errorf(KindInternal, "vector dim %d outside 1..%d", dim, MaxVectorDim)
	}
	if len(b) != 4*dim {
		return nil, errorf(KindInternal, "vector of %d bytes for dim %d (want %d)", len(b), dim, 4*dim)
	}
	v := make([]float32, dim)
	for i := range v {
		x := math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, errorf(KindInternal, "vector component %d is %v", i, x)
		}
		v[i] = x
	}
	return v, nil
}
