package bus_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/bus/bustest"
	"github.com/rath-run/rath/internal/bus/embedded"
)

// A revocation announced on one connection reaches a subscriber on
// another; announcements that cannot be a token id are neither sent nor
// passed on.
func TestTokenRevocationsReachOtherCoordinators(t *testing.T) {
	t.Parallel()
	one, srv, _ := bustest.New(t)
	two, nc := busOn(t, srv)
	got := make(chan string, 4)
	stop, err := two.SubscribeTokenRevocations(func(id string) { got <- id }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for _, bad := range []string{"", strings.Repeat("x", 65)} {
		if err := one.PublishTokenRevoked(bad); err == nil {
			t.Errorf("PublishTokenRevoked(%d bytes) accepted", len(bad))
		}
	}
	// Sent raw, around the check: dropped by the subscriber.
	for _, bad := range [][]byte{nil, []byte(strings.Repeat("x", 65))} {
		if err := nc.Publish(bus.TokenRevokedSubject, bad); err != nil {
			t.Fatal(err)
		}
	}
	if err := one.PublishTokenRevoked("tok_0123456789abcdef"); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-got:
		if id != "tok_0123456789abcdef" {
			t.Fatalf("revoked %q, want tok_0123456789abcdef", id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no revocation within 5s")
	}
	if _, err := two.SubscribeTokenRevocations(nil, nil); err == nil {
		t.Error("nil handler accepted")
	}
}

// A subscriber is told it cannot hear revocations while its connection is
// down, and that it can again once the server has its subscription back:
// an announcement sent right after it is told so reaches it.
func TestTokenRevocationsHearing(t *testing.T) {
	t.Parallel()
	_, srv, nc := bustest.New(t)
	b, err := bus.New(testCtx(t), nc, bus.Config{})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 4)
	heard := make(chan bool, 16)
	stop, err := b.SubscribeTokenRevocations(func(id string) { got <- id }, func(h bool) { heard <- h })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	next := func(want bool, what string) {
		t.Helper()
		select {
		case h := <-heard:
			if h != want {
				t.Fatalf("%s: hearing(%v), want hearing(%v)", what, h, want)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("%s: no hearing(%v) within 15s", what, want)
		}
	}
	next(true, "subscribed")

	opts := srv.Options()
	srv.Shutdown()
	next(false, "server down")

	srv2, err := embedded.Start(testCtx(t), opts)
	if err != nil {
		t.Fatalf("restart on port %d: %v", opts.Port, err)
	}
	t.Cleanup(srv2.Shutdown)
	next(true, "server back")
	// Announced on a new connection the moment the subscriber says it
	// hears again: it must arrive.
	pub, _ := busOn(t, srv2)
	if err := pub.PublishTokenRevoked("tok_00000000000000ff"); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-got:
		if id != "tok_00000000000000ff" {
			t.Fatalf("revoked %q", id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an announcement sent after hearing(true) did not arrive within 5s")
	}
}

// busOn returns a bus with the default config on a new connection to srv,
// as another process's would be, and the connection.
func busOn(t *testing.T, srv *embedded.Server) (*bus.Bus, *nats.Conn) {
	t.Helper()
	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	b, err := bus.New(testCtx(t), nc, bus.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return b, nc
}
