package app_test

import (
	"context"
	"flag"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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

// parseStoreNATS parses --store and args with env set to value, and
// returns the flags and Check's error.
func parseStoreNATS(t *testing.T, env, value string, args []string) (*app.StoreNATS, error) {
	t.Helper()
	t.Setenv(env, value)
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	f := app.StoreNATSFlags(fs)
	if err := fs.Parse(append([]string{"--store", "sqlite:x.db"}, args...)); err != nil {
		t.Fatal(err)
	}
	return f, f.Check()
}

func TestStoreNATSReplicas(t *testing.T) {
	for _, tc := range []struct {
		env     string
		args    []string
		want    int
		wantErr string
	}{
		{"", nil, 1, ""},
		{"3", nil, 3, ""},
		{"3", []string{"--nats-replicas", "1"}, 1, ""},
		{"x", nil, 0, `RATH_NATS_REPLICAS="x"`},
		{"", []string{"--nats-replicas", "6"}, 6, "want 1..5"},
	} {
		f, err := parseStoreNATS(t, "RATH_NATS_REPLICAS", tc.env, tc.args)
		switch {
		case tc.wantErr == "" && (err != nil || f.Replicas != tc.want):
			t.Errorf("env %q args %v: replicas %d, error %v; want %d", tc.env, tc.args, f.Replicas, err, tc.want)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("env %q args %v: error %v, want one containing %q", tc.env, tc.args, err, tc.wantErr)
		}
	}
}

func TestStoreNATSEventsMaxBytes(t *testing.T) {
	for _, tc := range []struct {
		env     string
		args    []string
		want    int64
		wantErr string
	}{
		{"", nil, 256 << 20, ""},
		{"4GiB", nil, 4 << 30, ""},
		{"4GiB", []string{"--events-max-bytes", "512MiB"}, 512 << 20, ""},
		{"lots", nil, 0, `RATH_EVENTS_MAX_BYTES) = "lots"`},
		{"", []string{"--events-max-bytes", "1MiB"}, 0, "at least 8MiB"},
		{"", []string{"--events-max-bytes", "-1"}, 0, "at least 8MiB"},
	} {
		f, err := parseStoreNATS(t, "RATH_EVENTS_MAX_BYTES", tc.env, tc.args)
		switch {
		case tc.wantErr == "" && (err != nil || f.EventsMaxBytes != tc.want):
			t.Errorf("env %q args %v: %d bytes, error %v; want %d", tc.env, tc.args, f.EventsMaxBytes, err, tc.want)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("env %q args %v: error %v, want one containing %q", tc.env, tc.args, err, tc.wantErr)
		}
	}
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

func TestCloseWithin(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	closed := false
	app.CloseWithin(closerFunc(func() error { closed = true; return nil }), time.Minute, log)
	if !closed {
		t.Fatal("a quick Close did not run to its end")
	}
	release := make(chan struct{})
	defer close(release)
	done := make(chan struct{})
	go func() {
		app.CloseWithin(closerFunc(func() error { <-release; return nil }), 10*time.Millisecond, log)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("CloseWithin waited for a Close that never returns")
	}
}
