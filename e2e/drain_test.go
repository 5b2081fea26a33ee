package e2e

import (
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/runs"
)

// TestWorkerReadyzWhileDraining: after SIGTERM a worker finishing its step
// answers /readyz with 503 (so a load balancer or orchestrator stops
// counting it), then the step commits and the worker exits 0.
func TestWorkerReadyzWhileDraining(t *testing.T) {
	t.Parallel()
	health := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	c := newCluster(t, clusterConfig{workers: 1, workerArgs: []string{"--health", health, "--shutdown-timeout", "30s"}})
	w := c.workers[0]
	readyz := func() int {
		res, err := http.Get("http://" + health + "/readyz")
		if err != nil {
			return 0
		}
		res.Body.Close()
		return res.StatusCode
	}
	c.waitFor("worker ready", 30*time.Second, func() bool { return readyz() == http.StatusOK })
	r := c.submit(4*time.Second, "drain me")
	c.waitRun(r.ID, 30*time.Second, "the step running", func(r runs.Run) bool {
		return len(r.Steps) == 1 && r.Steps[0].Status == runs.StepRunning
	})
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	c.waitFor("/readyz 503 after SIGTERM", 10*time.Second, func() bool { return readyz() == http.StatusServiceUnavailable })
	if !w.running() {
		t.Fatal("the worker exited before its step finished; nothing was draining")
	}
	got := c.waitRun(r.ID, 30*time.Second, "an end", func(r runs.Run) bool { return r.Status.Terminal() })
	if got.Status != runs.RunSucceeded || got.Steps[0].Attempts != 1 {
		t.Fatalf("run %s (step attempts %d), want succeeded on the draining worker", got.Status, got.Steps[0].Attempts)
	}
	c.waitFor("the worker to exit", 30*time.Second, func() bool { return !w.running() })
	if w.err != nil {
		t.Fatalf("worker exit: %v", w.err)
	}
}
