package llm

import (
	"context"

	openai "github.com/sashabaranov/go-openai"
)

// MaxEmbedInputs is the most texts one Embed call sends (OpenAI's limit
// per /v1/embeddings request is 2,048).
const MaxEmbedInputs = 2048

// Embedder turns texts into vectors with an OpenAI-compatible
// /v1/embeddings endpoint, through the same client, retries, error
// classification and key redaction as [OpenAI]. It satisfies
// memory.Embedder. An Embedder is safe for concurrent use.
type Embedder struct{ p *OpenAI }

// NewEmbedder returns an Embedder for cfg; cfg.Model names the embedding
// model (e.g. text-embedding-3-small) and is required. It makes no network
// call.
func NewEmbedder(cfg OpenAIConfig) (*Embedder, error) {
	if cfg.Model == "" {
		return nil, permanentf("config", "Model is required for embeddings (e.g. text-embedding-3-small)")
	}
	p, err := NewOpenAI(cfg)
	if err != nil {
		return nil, err
	}
	return &Embedder{p: p}, nil
}

// Model returns the embedding model; vectors are cached per model.
func (e *Embedder) Model() string { return e.p.cfg.Model }

// Embed returns one vector per text, in order. Every vector has the same
// dimension; a reply with a missing, duplicate or out-of-range index, a
// wrong count, or mixed or zero dimensions is a permanent [*Error].
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	const op = "embed"
	if len(texts) == 0 {
		return nil, nil
	}
	if len(texts) > MaxEmbedInputs {
		return nil, permanentf(op, "%d inputs, over MaxEmbedInputs %d", len(texts), MaxEmbedInputs)
	}
	var data []openai.Embedding
	_, err := e.p.withRetry(ctx, op, nil, func(actx context.Context) (Response, bool, error) {
		r, err := e.p.client.CreateEmbeddings(actx, openai.EmbeddingRequestStrings{
			Input: texts,
			Model: openai.EmbeddingModel(e.p.cfg.Model),
		})
		if err != nil {
			return Response{}, false, err
		}
		data = r.Data
		return Response{}, false, nil
	})
	if err != nil {
		return nil, err
	}
	return orderVectors(data, len(texts))
}

// orderVectors places the reply's vectors by their index and checks that
// each text got exactly one, all of one nonzero dimension.
func orderVectors(data []openai.Embedding, n int) ([][]float32, error) {
	if len(data) != n {
		return nil, permanentf("embed", "reply has %d embeddings for %d inputs", len(data), n)
	}
	vs := make([][]float32, n)
	for _, d := range data {
		if d.Index < 0 || d.Index >= n {
			return nil, permanentf("embed", "reply index %d is outside 0..%d", d.Index, n-1)
		}
		if vs[d.Index] != nil {
			return nil, permanentf("embed", "reply repeats index %d", d.Index)
		}
		if len(d.Embedding) == 0 || len(d.Embedding) != len(data[0].Embedding) {
			return nil, permanentf("embed", "reply index %d has dimension %d, want %d (nonzero, the same for all)", d.Index, len(d.Embedding), len(data[0].Embedding))
		}
		vs[d.Index] = d.Embedding
	}
	return vs, nil
}

// ResolveEmbedder builds the Embedder for the embedding model named model
// on the endpoint [Resolve] finds for it (spec, then the environment, then
// the config file), so embeddings use the same base URL and key as chat.
// The endpoint must be OpenAI-compatible: the scripted model has no
// embeddings, and naming it is a permanent error.
func ResolveEmbedder(spec ProviderSpec, model string, getenv func(string) string) (*Embedder, error) {
	if model == "" {
		return nil, permanentf("resolve", "no embedding model named")
	}
	p, m, err := Resolve(spec, model, getenv)
	if err != nil {
		return nil, err
	}
	o, ok := p.(*OpenAI)
	if !ok {
		return nil, permanentf("resolve", "embedding model %q: embeddings need an OpenAI-compatible endpoint, not %T", m, p)
	}
	cfg := o.cfg
	cfg.Model = m
	return NewEmbedder(cfg)
}
