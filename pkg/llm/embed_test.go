package llm_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/llm/llmtest"
)

func TestEmbedder(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewEmbeddingServer(t, func(model, text string) []float32 {
		return []float32{float32(len(text)), float32(len(model))}
	})
	e, err := llm.NewEmbedder(llm.OpenAIConfig{BaseURL: srv.URL(), APIKey: "sk-embed-secret", Model: "text-embedding-3-small", MaxAttempts: 2, BaseDelay: 1})
	if err != nil {
		t.Fatal(err)
	}
	if e.Model() != "text-embedding-3-small" {
		t.Fatalf("Model() = %q", e.Model())
	}
	ctx := context.Background()
	// The server sends data in reverse index order: vectors are placed by index.
	vs, err := e.Embed(ctx, []string{"a", "bbb", "cc"})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 3 || vs[0][0] != 1 || vs[1][0] != 3 || vs[2][0] != 2 || vs[0][1] != float32(len("text-embedding-3-small")) {
		t.Fatalf("vectors: %v", vs)
	}
	if vs, err := e.Embed(ctx, nil); err != nil || vs != nil {
		t.Fatalf("no texts: %v %v", vs, err)
	}
	if _, err := e.Embed(ctx, make([]string, llm.MaxEmbedInputs+1)); !errors.Is(err, llm.ErrPermanent) || !strings.Contains(err.Error(), "MaxEmbedInputs") {
		t.Fatalf("too many inputs: %v", err)
	}
	srv.Fail(http.StatusBadRequest)
	_, err = e.Embed(ctx, []string{"x"})
	if !errors.Is(err, llm.ErrPermanent) || !strings.Contains(err.Error(), "status 400") {
		t.Fatalf("400: %v", err)
	}
	before := srv.Requests()
	srv.Fail(http.StatusServiceUnavailable)
	_, err = e.Embed(ctx, []string{"x"})
	if !errors.Is(err, llm.ErrTransient) || srv.Requests()-before != 2 {
		t.Fatalf("503: %v after %d requests, want transient after 2", err, srv.Requests()-before)
	}
	srv.Close()
	_, err = e.Embed(ctx, []string{"x"})
	if !errors.Is(err, llm.ErrTransient) || strings.Contains(err.Error(), "sk-embed-secret") {
		t.Fatalf("down: %v", err)
	}
	if _, err := llm.NewEmbedder(llm.OpenAIConfig{BaseURL: srv.URL()}); !errors.Is(err, llm.ErrPermanent) || !strings.Contains(err.Error(), "Model is required") {
		t.Fatalf("no model: %v", err)
	}
}

func TestResolveEmbedder(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewEmbeddingServer(t, func(_, text string) []float32 { return []float32{float32(len(text))} })
	env := map[string]string{"OPENAI_BASE_URL": srv.URL(), "OPENAI_API_KEY": "sk-x"}
	e, err := llm.ResolveEmbedder(llm.ProviderSpec{}, "text-embedding-3-small", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if vs, err := e.Embed(context.Background(), []string{"four"}); err != nil || len(vs) != 1 || vs[0][0] != 4 || e.Model() != "text-embedding-3-small" {
		t.Fatalf("embed through the resolved endpoint: %v %v", vs, err)
	}
	if _, err := llm.ResolveEmbedder(llm.ProviderSpec{}, llm.ScriptedModel, nil); !errors.Is(err, llm.ErrPermanent) || !strings.Contains(err.Error(), "OpenAI-compatible") {
		t.Fatalf("scripted: %v", err)
	}
	if _, err := llm.ResolveEmbedder(llm.ProviderSpec{}, "", nil); !errors.Is(err, llm.ErrPermanent) {
		t.Fatalf("no model: %v", err)
	}
}
