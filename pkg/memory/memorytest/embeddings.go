package memorytest

import (
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/llm/llmtest"
	"github.com/rath-run/rath/pkg/memory"
)

// concepts is the fake embedding model's vocabulary: a text's vector
// counts its words per concept, so synonyms BM25 cannot match ("feline",
// "cat") land on the same axis.
var concepts = [][]string{
	{"cat", "cats", "feline", "kitten", "sofa"},
	{"stock", "stocks", "prices", "market", "finance"},
	{"rain", "umbrella", "weather", "storm"},
}

// fakeEmbed is the embeddings server's model: concept counts, plus one
// axis per model name so two models give different vectors.
func fakeEmbed(model, text string) []float32 {
	v := make([]float32, len(concepts)+1)
	for _, w := range memory.Tokenize(text) {
		for i, c := range concepts {
			if slices.Contains(c, w) {
				v[i]++
			}
		}
	}
	if model == "fake-embed-2" {
		v[len(concepts)] = 0.5
	}
	return v
}

// testEmbeddings runs embedding recall against a fake /v1/embeddings
// server through llm.Embedder: cosine ranking, the vector cache per model
// and per text, and the BM25 fallback with a warning when the endpoint
// fails or is down.
func testEmbeddings(t *testing.T, open Open) {
	ctx := ctxT(t)
	st := openT(t, open)
	cache, ok := st.(memory.VectorCache)
	if !ok {
		t.Fatalf("%T does not implement memory.VectorCache", st)
	}
	for _, w := range []memory.Write{
		{URI: "memory://user/a_market", Text: "Stock prices rose today."},
		{URI: "memory://user/b_pet", Text: "The cat sleeps on the sofa.", VersionID: "v-1"},
		{URI: "memory://user/c_weather", Text: "Bring an umbrella: rain tomorrow."},
	} {
		if _, err := st.Remember(ctx, "", w); err != nil {
			t.Fatal(err)
		}
	}
	srv := llmtest.NewEmbeddingServer(t, fakeEmbed)
	embedder := func(model string) *llm.Embedder {
		e, err := llm.NewEmbedder(llm.OpenAIConfig{BaseURL: srv.URL(), APIKey: "sk-memorytest", Model: model, MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	sem := &memory.Semantic{Store: st, Embedder: embedder("fake-embed-1"), Cache: cache}

	// BM25 knows no "feline": every score is 0 and URI order fills the top k.
	bm25, err := st.Recall(ctx, "", memory.Query{Text: "feline", TopK: 2})
	if err != nil || len(bm25) != 2 || bm25[0].URI != "memory://user/a_market" || bm25[0].Score != 0 {
		t.Fatalf("bm25 recall: %+v %v", bm25, err)
	}
	r, err := sem.RecallInfo(ctx, "", memory.Query{Text: "feline", TopK: 2})
	if err != nil || r.Mode != memory.ModeEmbedding || r.Warning != "" || len(r.Hits) != 2 {
		t.Fatalf("embedding recall: %+v %v", r, err)
	}
	if h := r.Hits[0]; h.URI != "memory://user/b_pet" || math.Abs(h.Score-1) > 1e-9 || h.VersionID != "v-1" || h.Snippet != "The cat sleeps on the sofa." {
		t.Fatalf("top hit: %+v", h)
	}
	if got := len(srv.Inputs()); got != 4 { // three items and the query
		t.Fatalf("first recall embedded %d texts, want 4: %q", got, srv.Inputs())
	}

	// Cached: the next recall embeds only its query.
	if hits, err := sem.Recall(ctx, "", memory.Query{Text: "stock market", TopK: 1}); err != nil || len(hits) != 1 || hits[0].URI != "memory://user/a_market" {
		t.Fatalf("second recall: %+v %v", hits, err)
	}
	if got := srv.Inputs(); len(got) != 5 || got[4] != "stock market" {
		t.Fatalf("second recall embedded %q, want only the query", got[4:])
	}
	// A rewritten item is embedded again; the others stay cached.
	if _, err := st.Remember(ctx, "", memory.Write{URI: "memory://user/c_weather", Text: "A storm and rain all week."}); err != nil {
		t.Fatal(err)
	}
	if hits, err := sem.Recall(ctx, "", memory.Query{Text: "weather", TopK: 1}); err != nil || len(hits) != 1 || hits[0].URI != "memory://user/c_weather" {
		t.Fatalf("recall after rewrite: %+v %v", hits, err)
	}
	if got := srv.Inputs()[5:]; len(got) != 2 || got[0] != "A storm and rain all week." {
		t.Fatalf("after a rewrite embedded %q, want the rewritten item and the query", got)
	}
	// Vectors are cached per model: another model embeds everything again.
	other := &memory.Semantic{Store: st, Embedder: embedder("fake-embed-2"), Cache: cache}
	if r, err := other.RecallInfo(ctx, "", memory.Query{Text: "kitten", TopK: 1}); err != nil || r.Mode != memory.ModeEmbedding || r.Hits[0].URI != "memory://user/b_pet" {
		t.Fatalf("other model: %+v %v", r, err)
	}
	if got := len(srv.Inputs()); got != 7+4 {
		t.Fatalf("other model embedded %d texts in all, want 11", got)
	}
	// An empty scope is an empty embedding recall; bad input is an error.
	if r, err := sem.RecallInfo(ctx, "", memory.Query{Text: "cat", Scope: "memory://agent"}); err != nil || r.Mode != memory.ModeEmbedding || len(r.Hits) != 0 {
		t.Fatalf("empty scope: %+v %v", r, err)
	}
	if _, err := sem.RecallInfo(ctx, "", memory.Query{Text: "cat", Scope: "memory://tenant"}); !memory.IsKind(err, memory.KindInvalidURI) && !memory.IsKind(err, memory.KindInvalidArgument) {
		t.Fatalf("bad scope: %v", err)
	}

	// The endpoint failing, then down: BM25 answers, with a warning.
	want, err := st.Recall(ctx, "", memory.Query{Text: "cat sofa", TopK: 3})
	if err != nil {
		t.Fatal(err)
	}
	srv.Fail(http.StatusInternalServerError)
	r, err = sem.RecallInfo(ctx, "", memory.Query{Text: "cat sofa", TopK: 3})
	if err != nil || r.Mode != memory.ModeBM25 || !strings.Contains(r.Warning, "used BM25") || !strings.Contains(r.Warning, "status 500") {
		t.Fatalf("failing endpoint: %+v %v", r, err)
	}
	sameHits(t, "fallback on 500", r.Hits, want)
	srv.Close()
	r, err = sem.RecallInfo(ctx, "", memory.Query{Text: "cat sofa", TopK: 3})
	if err != nil || r.Mode != memory.ModeBM25 || !strings.Contains(r.Warning, "connection") || strings.Contains(r.Warning, "sk-memorytest") {
		t.Fatalf("endpoint down: %+v %v", r, err)
	}
	sameHits(t, "fallback when down", r.Hits, want)
	// Without an embedder, Semantic is BM25.
	plain := &memory.Semantic{Store: st}
	if r, err := plain.RecallInfo(ctx, "", memory.Query{Text: "cat sofa", TopK: 3}); err != nil || r.Mode != memory.ModeBM25 || r.Warning != "" {
		t.Fatalf("no embedder: %+v %v", r, err)
	}
}
