package client_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/coordinator"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/sqlitestore"
	"github.com/rath-run/rath/pkg/store/storetest"
)

// TestGraphConformance runs the stores' session.Graph conformance suite
// on client.Graph against a real coordinator: each graph the suite opens
// is a coordinator of its own on a new SQLite store (sharing one NATS and
// run store), served over HTTP. The coordinator refuses client-chosen
// version keys (keys are the system's), so the keyed cases check that
// refusal.
func TestGraphConformance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	d, err := app.StartDev(ctx, app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", Workers: -1, StoreURL: "sqlite:" + filepath.Join(dir, "rath.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	storetest.RunGraphWith(t, func(t *testing.T) session.Graph {
		st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "graph.db"), sqlitestore.Options{Migrate: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		c, err := coordinator.New(st, d.Backend.Runs, d.Backend.Bus, coordinator.Config{})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(c.Handler())
		t.Cleanup(srv.Close)
		cl, err := client.New(srv.URL, "")
		if err != nil {
			t.Fatal(err)
		}
		return cl.Graph()
	}, storetest.GraphOptions{RefusesKeys: true})
}
