package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/coordinator"
)

// bootstrapToken is the admin token of the test coordinator.
const bootstrapToken = "client-test-bootstrap-token"

// stack is a real in-process cluster for the client's tests: a dev stack
// (embedded NATS, a store, one worker with the scripted model) and a
// coordinator over it that requires a token, served by an httptest
// server.
type stack struct {
	// URL is the authenticating coordinator's base URL.
	URL   string
	close func()
}

// startStack starts a stack in dir on storeURL (sqlite when empty).
func startStack(ctx context.Context, dir, storeURL string) (*stack, error) {
	if storeURL == "" {
		storeURL = "sqlite:" + filepath.Join(dir, "rath.db")
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	d, err := app.StartDev(ctx, app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", Workers: 1, StoreURL: storeURL, Logger: quiet})
	if err != nil {
		return nil, fmt.Errorf("start dev stack: %w", err)
	}
	closers := []func(){d.Close}
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	tokens, err := d.Backend.TokenStore()
	if err != nil {
		closeAll()
		return nil, err
	}
	// Retention (gc, pins, redaction, check) and Memory serve the default
	// tenant's requests, as in rathctl dev.
	ret, err := d.Backend.Retention()
	if err != nil {
		closeAll()
		return nil, err
	}
	cfg := coordinator.Config{Token: bootstrapToken, Tokens: tokens, SameDatabase: d.Backend.SubmitInOneTx(), Logger: quiet,
		Memory: d.Backend.Memory, Retention: ret}
	pools, err := app.TenantPools(storeURL)
	if err != nil {
		closeAll()
		return nil, err
	}
	if pools != nil {
		closers = append(closers, func() { _ = pools.Close() })
		cfg.Tenants = pools
	}
	c, err := coordinator.New(d.Backend.Store, d.Backend.Runs, d.Backend.Bus, cfg)
	if err != nil {
		closeAll()
		return nil, err
	}
	srv := httptest.NewServer(c.Handler())
	closers = append(closers, srv.Close)
	return &stack{URL: srv.URL, close: closeAll}, nil
}

// newStack is startStack for one test, closed when it ends.
func newStack(t *testing.T, storeURL string) *stack {
	t.Helper()
	s, err := startStack(context.Background(), t.TempDir(), storeURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	return s
}

// serverURL is the coordinator of the package's examples (TestMain starts
// it): runnable examples take no *testing.T to start one themselves.
var serverURL string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "rath-client-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	s, err := startStack(context.Background(), dir, "")
	if err != nil {
		fmt.Fprintln(os.Stderr, errors.Join(errors.New("client tests: start the example stack"), err))
		return 1
	}
	defer s.close()
	serverURL = s.URL
	return m.Run()
}
