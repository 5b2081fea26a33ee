// Package bustest provides a real, throwaway JetStream for tests: an
// embedded server on a temporary store, a connection to it and a [bus.Bus],
// all torn down by t.Cleanup.
package bustest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/bus/embedded"
)

// Options tunes [NewWith].
type Options struct {
	// Config is the bus config (defaults apply to zero fields).
	Config bus.Config
	// InProcess connects through an in-process pipe instead of TCP
	// loopback. An in-process connection cannot follow a server restart.
	InProcess bool
	// StoreDir is the JetStream store; default t.TempDir().
	StoreDir string
	// MaxFileStore bounds the server's JetStream file storage
	// (embedded.Options.MaxFileStore); default NATS' own.
	MaxFileStore int64
}

// New starts an embedded server with JetStream on a t.TempDir store,
// listening on a random loopback port, connects to it over TCP and returns
// a Bus with the default Config. Everything is closed by t.Cleanup.
func New(t testing.TB) (*bus.Bus, *embedded.Server, *nats.Conn) {
	t.Helper()
	return NewWith(t, Options{})
}

// NewWith is [New] with options.
func NewWith(t testing.TB, o Options) (*bus.Bus, *embedded.Server, *nats.Conn) {
	t.Helper()
	if o.StoreDir == "" {
		o.StoreDir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := embedded.Start(ctx, embedded.Options{StoreDir: o.StoreDir, Port: -1, InProcess: o.InProcess, MaxFileStore: o.MaxFileStore})
	if err != nil {
		t.Fatalf("bustest: start server: %v", err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := srv.Connect()
	if err != nil {
		t.Fatalf("bustest: connect: %v", err)
	}
	t.Cleanup(nc.Close)
	b, err := bus.New(ctx, nc, o.Config)
	if err != nil {
		t.Fatalf("bustest: new bus: %v", err)
	}
	return b, srv, nc
}
