// Command fakeopenai is example 10's stand-in for two model providers: a
// tiny OpenAI-compatible chat completions server, offline. It serves any
// path ending in /chat/completions (so base URLs such as URL/small/v1 and
// URL/large/v1 act as two providers) and answers each request with one line
// naming the endpoint and the model that answered, streamed as server-sent
// events when the request asks for a stream, with usage in the last chunk.
//
// It listens on 127.0.0.1 on a free port and prints its URL as its first
// line of output.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

type message struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
}

type request struct {
	Model    string    `json:"model"`
	Messages []message `json:"messages"`
	Stream   bool      `json:"stream"`
}

func main() {
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stdout, "http://%s\n", ln.Addr())
	srv := &http.Server{Handler: http.HandlerFunc(serve), ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.Serve(ln))
}

func serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.Error(w, `{"error":{"message":"not found","type":"invalid_request_error"}}`, http.StatusNotFound)
		return
	}
	var req request
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad request body","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	endpoint := strings.TrimSuffix(strings.TrimSuffix(r.URL.Path, "/chat/completions"), "/v1")
	endpoint = strings.Trim(endpoint, "/")
	last := ""
	for _, m := range req.Messages {
		if s, ok := m.Content.(string); ok && m.Role == "user" {
			last = s
		}
	}
	answer := fmt.Sprintf("[%s endpoint, model %s] You asked: %q", endpoint, req.Model, last)
	usage := map[string]int{"prompt_tokens": 10 * len(req.Messages), "completion_tokens": len(strings.Fields(answer))}
	usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
	id := "chatcmpl-fake"
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": id, "object": "chat.completion", "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": answer}}},
			"usage": usage,
		})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	send(chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	for i, word := range strings.Fields(answer) {
		if i > 0 {
			word = " " + word
		}
		send(chunk(map[string]any{"content": word}, nil))
	}
	send(chunk(map[string]any{}, "stop"))
	send(map[string]any{"id": id, "object": "chat.completion.chunk", "model": req.Model, "choices": []any{}, "usage": usage})
	fmt.Fprint(w, "data: [DONE]\n\n")
}
