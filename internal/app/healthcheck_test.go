package app_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/app"
)

func TestHealthcheck(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			http.Error(w, "nats: not connected", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	}))
	defer srv.Close()
	if err := app.Healthcheck(context.Background(), srv.URL+"/healthz"); err != nil {
		t.Fatalf("healthy endpoint: %v", err)
	}
	err := app.Healthcheck(context.Background(), srv.URL+"/readyz")
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("503 endpoint: error %v, want one naming 503", err)
	}
	srv.Close()
	if err := app.Healthcheck(context.Background(), srv.URL+"/healthz"); err == nil {
		t.Fatal("closed server: no error")
	}
}
