package coordinator_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves goroutines behind (the
// reconciler, SSE streams, bus subscriptions).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
