package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/worker"
)

// TestWorkerHeartbeatWithinAckWait: a heartbeat at or beyond the ack wait
// is refused with an error naming both; left unset it is derived from it.
func TestWorkerHeartbeatWithinAckWait(t *testing.T) {
	t.Parallel()
	s := startDev(t, "", app.DevConfig{Workers: -1, Bus: bus.Config{AckWait: 3 * time.Second}})
	ctx := context.Background()
	getenv := func(string) string { return "" }
	_, err := app.NewWorker(ctx, s.dev.Backend, getenv, worker.Config{Heartbeat: 5 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "heartbeat 5s") || !strings.Contains(err.Error(), "ack wait 3s") {
		t.Fatalf("NewWorker with a 5s heartbeat under a 3s ack wait: %v; want an error naming both", err)
	}
	// Unset, the heartbeat is derived from the ack wait (a third of it).
	w, err := app.NewWorker(ctx, s.dev.Backend, getenv, worker.Config{})
	if err != nil || w == nil {
		t.Fatalf("NewWorker with the default heartbeat: %v", err)
	}
}
