package workermain

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestReadyz: ready while running and connected; 503 while NATS is down,
// and 503 once the worker's context ended (draining after SIGTERM), even
// though NATS is still connected.
func TestReadyz(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	connected := true
	h := readyz(ctx, func() bool { return connected })
	get := func() (int, string) {
		rec := httptest.NewRecorder()
		h(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get(); code != http.StatusOK || body != "ready\n" {
		t.Fatalf("running: %d %q, want 200 ready", code, body)
	}
	connected = false
	if code, body := get(); code != http.StatusServiceUnavailable || !strings.Contains(body, "nats") {
		t.Fatalf("NATS down: %d %q, want 503 naming nats", code, body)
	}
	connected = true
	stop() // SIGTERM: app.Main cancels the context
	if code, body := get(); code != http.StatusServiceUnavailable || !strings.Contains(body, "draining") {
		t.Fatalf("draining: %d %q, want 503 draining", code, body)
	}
}
