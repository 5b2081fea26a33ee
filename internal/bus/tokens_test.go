package bus_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/bus/bustest"
)

// A revocation announced on one connection reaches a subscriber on
// another; announcements that cannot be a token id are neither sent nor
// passed on.
func TestTokenRevocationsReachOtherCoordinators(t *testing.T) {
	t.Parallel()
	one, srv, _ := bustest.New(t)
	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	two, err := bus.New(testCtx(t), nc, bus.Config{})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 4)
	stop, err := two.SubscribeTokenRevocations(func(id string) { got <- id })
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
	if _, err := two.SubscribeTokenRevocations(nil); err == nil {
		t.Error("nil handler accepted")
	}
}
