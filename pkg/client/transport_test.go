package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/rath-run/rath/pkg/client"
)

type countingTransport struct {
	base http.RoundTripper
	n    atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.base.RoundTrip(r)
}

// TestNewUsesWrappedDefaultTransport: a program that wraps
// http.DefaultTransport after this package was loaded (rathctl wraps it
// with otelhttp so its requests carry the command's traceparent) gets its
// wrapper in clients it makes afterwards. The transport used to be built
// at package init, so rathctl's API calls left untraced.
func TestNewUsesWrappedDefaultTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()

	orig := http.DefaultTransport
	// Warm the pool first, as an earlier client in the process would.
	if c, err := client.New(srv.URL, ""); err != nil {
		t.Fatal(err)
	} else if err := c.Do(context.Background(), http.MethodGet, "/v1/runs", nil, nil); err != nil {
		t.Fatal(err)
	}
	wrap := &countingTransport{base: orig}
	http.DefaultTransport = wrap
	defer func() { http.DefaultTransport = orig }()

	c, err := client.New(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Do(context.Background(), http.MethodGet, "/v1/runs", nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := wrap.n.Load(); got != 1 {
		t.Fatalf("the wrapped default transport carried %d requests, want 1", got)
	}
}
