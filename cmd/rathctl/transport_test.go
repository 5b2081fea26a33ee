package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rath-run/rath/pkg/client"
)

// TestTracedClientsKeepTheirConnections: with tracing on, rathctl wraps
// http.DefaultTransport; its API clients (a workflow driver's concurrent
// steps, the bench's submissions) still keep their connections between
// waves of concurrent requests instead of dialing again past Go's 2 idle
// connections per host.
func TestTracedClientsKeepTheirConnections(t *testing.T) {
	saved := http.DefaultTransport
	t.Cleanup(func() { http.DefaultTransport = saved })
	traceDefaultTransport()

	const wave = 16
	var dials atomic.Int64
	var arrived sync.WaitGroup
	release := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Done()
		<-release // every request of the wave is in flight at once
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dials.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	cl, err := client.New(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	send := func() {
		t.Helper()
		arrived.Add(wave)
		release = make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, wave)
		for range wave {
			wg.Go(func() {
				var out map[string]any
				errs <- cl.Do(context.Background(), http.MethodGet, "/v1/runs", nil, &out)
			})
		}
		arrived.Wait()
		close(release)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	send()
	first := dials.Load()
	send()
	if again := dials.Load() - first; again != 0 {
		t.Errorf("the second wave of %d requests dialed %d new connections (the first dialed %d): idle connections were dropped", wave, again, first)
	}
}
