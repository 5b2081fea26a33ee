package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// EmbeddingServer is a fake OpenAI-compatible embeddings endpoint: POST
// …/embeddings with {"model": …, "input": "text" or ["text", …]} answers
// {"object": "list", "data": [{"object": "embedding", "index": i,
// "embedding": [...]}, …], "model": …, "usage": {…}}, the real wire
// format, with vectors from the function given to [NewEmbeddingServer].
// Data is sent in reverse index order, so clients must place vectors by
// index. Fail makes every following request answer the given status; Close
// takes the endpoint down (connections are refused). It is safe for
// concurrent use.
type EmbeddingServer struct {
	srv   *httptest.Server
	embed func(model, text string) []float32

	mu       sync.Mutex // guards following
	inputs   []string
	requests int
	fail     int
	closed   bool
}

// NewEmbeddingServer starts an embeddings server whose vector for a text is
// embed(model, text), and closes it when the test ends.
func NewEmbeddingServer(tb testing.TB, embed func(model, text string) []float32) *EmbeddingServer {
	s := &EmbeddingServer{embed: embed}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	tb.Cleanup(s.Close)
	return s
}

// URL returns the API root to configure clients with (…/v1).
func (s *EmbeddingServer) URL() string { return s.srv.URL + "/v1" }

// Inputs returns every text embedded so far, in arrival order.
func (s *EmbeddingServer) Inputs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.inputs...)
}

// Requests returns how many requests were received.
func (s *EmbeddingServer) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// Fail makes every following request answer status with an OpenAI error
// body (0 restores normal answers).
func (s *EmbeddingServer) Fail(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = status
}

// Close takes the endpoint down. It is idempotent.
func (s *EmbeddingServer) Close() {
	s.mu.Lock()
	closed := s.closed
	s.closed = true
	s.mu.Unlock()
	if !closed {
		s.srv.CloseClientConnections()
		s.srv.Close()
	}
}

func (s *EmbeddingServer) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests++
	fail := s.fail
	s.mu.Unlock()
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/embeddings") {
		writeError(w, Reply{Status: http.StatusNotFound, ErrorMessage: "llmtest serves POST …/embeddings only"})
		return
	}
	if fail != 0 {
		writeError(w, Reply{Status: fail, ErrorMessage: "llmtest: embeddings failing on purpose"})
		return
	}
	var req struct {
		Model string          `json:"model"`
		Input json.RawMessage `json:"input"`
	}
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	var inputs []string
	if err == nil {
		if err = json.Unmarshal(req.Input, &inputs); err != nil {
			var one string
			if err = json.Unmarshal(req.Input, &one); err == nil {
				inputs = []string{one}
			}
		}
	}
	if err != nil || req.Model == "" || len(inputs) == 0 {
		writeError(w, Reply{Status: http.StatusBadRequest, ErrorMessage: fmt.Sprintf("llmtest: want {model, input}: %v", err)})
		return
	}
	s.mu.Lock()
	s.inputs = append(s.inputs, inputs...)
	s.mu.Unlock()
	data := make([]map[string]any, 0, len(inputs))
	tokens := 0
	for i := len(inputs) - 1; i >= 0; i-- {
		tokens += len(words(inputs[i]))
		data = append(data, map[string]any{"object": "embedding", "index": i, "embedding": s.embed(req.Model, inputs[i])})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"object": "list",
		"data":   data,
		"model":  req.Model,
		"usage":  map[string]int{"prompt_tokens": tokens, "total_tokens": tokens},
	})
}
