package app

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
)

// gatedModelEnv makes the test binary run gatedModel (TestMain), for
// TestWorkerHeap, which measures a heap the fake model must stay out of.
const gatedModelEnv = "RATH_TEST_GATED_MODEL"

// gatedModel serves OpenAI chat completions ("done") on a free port, which
// it prints: at once, or, between POST /hold and POST /release, once
// released.
func gatedModel() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var mu sync.Mutex
	gate := make(chan struct{})
	close(gate)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hold", func(http.ResponseWriter, *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		gate = make(chan struct{})
	})
	mux.HandleFunc("POST /release", func(http.ResponseWriter, *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		select {
		case <-gate:
		default:
			close(gate)
		}
	})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		g := gate
		mu.Unlock()
		select {
		case <-g:
		case <-r.Context().Done():
			return
		}
		if !bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":"chatcmpl-heap","object":"chat.completion","created":1,"model":"gpt-heap-test",`+
				`"choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],`+
				`"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"id":"chatcmpl-heap","object":"chat.completion.chunk","created":1,"model":"gpt-heap-test",`+
			`"choices":[{"index":0,"delta":{"role":"assistant","content":"done"},"finish_reason":"stop"}]}`+"\n\n"+
			`data: {"id":"chatcmpl-heap","object":"chat.completion.chunk","created":1,"model":"gpt-heap-test","choices":[],`+
			`"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`+"\n\n"+
			"data: [DONE]\n\n")
	})
	fmt.Printf("http://%s\n", ln.Addr())
	_ = http.Serve(ln, mux)
}
