package embedded_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/rath-run/rath/internal/bus/embedded"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStartValidation(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	for name, o := range map[string]embedded.Options{
		"StoreDir": {},
		"NoListen": {StoreDir: t.TempDir(), NoListen: true},
		"Port":     {StoreDir: t.TempDir(), Port: 70000},
	} {
		if _, err := embedded.Start(ctx, o); !errors.Is(err, embedded.ErrInvalidOptions) {
			t.Fatalf("%s: err = %v, want ErrInvalidOptions", name, err)
		}
	}
}

func roundTrip(t *testing.T, srv *embedded.Server) {
	t.Helper()
	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "t.x", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, "T")
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMsg(ctx, 1)
	if err != nil || string(m.Data) != "hi" {
		t.Fatalf("GetMsg: %v %q", err, m.Data)
	}
}

func TestTCP(t *testing.T) {
	t.Parallel()
	srv, err := embedded.Start(t.Context(), embedded.Options{StoreDir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	if srv.Port() <= 0 || srv.ClientURL() == "" {
		t.Fatalf("port %d url %q", srv.Port(), srv.ClientURL())
	}
	roundTrip(t, srv)
	srv.Shutdown() // twice is fine (deferred call too)
}

func TestInProcessNoListen(t *testing.T) {
	t.Parallel()
	srv, err := embedded.Start(t.Context(), embedded.Options{StoreDir: t.TempDir(), InProcess: true, NoListen: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	if srv.ClientURL() != "" || srv.Port() != 0 {
		t.Fatalf("NoListen server has url %q port %d", srv.ClientURL(), srv.Port())
	}
	roundTrip(t, srv)
}
