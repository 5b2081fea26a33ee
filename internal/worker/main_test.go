package worker_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves goroutines behind, but
// for a long poll a stopped worker gave up on: it ends on its own once its
// wait (the worker's FetchWait) and nats.go's second after it pass, and
// Naks any job it still receives (bus.Consumer.Fetch).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*pullConsumer).fetch.func1"),
		goleak.IgnoreTopFunction("github.com/rath-run/rath/internal/bus.nakLate"))
}
