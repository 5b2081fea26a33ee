package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/gctune"
)

// TestGCDefaults: the coordinator and worker binaries run the collector at
// Rath's default where GOGC is unset, and an operator's GOGC stands; both
// as their /metrics (go_gc_gogc_percent) say.
func TestGCDefaults(t *testing.T) {
	t.Parallel()
	health, own := freePort(t), freePort(t)
	c := newCluster(t, clusterConfig{workers: 1, env: []string{"GOGC=", "GOMEMLIMIT="},
		workerArgs: []string{"--health", fmt.Sprintf("127.0.0.1:%d", health)}})
	w2 := c.add("worker", "--store", c.storeURL, "--nats", c.natsURL, "--name", "w2",
		"--health", fmt.Sprintf("127.0.0.1:%d", own), "--slots", "1")
	w2.env = []string{"GOGC=150"}
	w2.start(t)
	for _, p := range []struct {
		name, url string
		want      float64
	}{
		{"coordinator", c.server + "/metrics", gctune.DefaultGOGC},
		{"worker", fmt.Sprintf("http://127.0.0.1:%d/metrics", health), gctune.DefaultGOGC},
		{"worker with GOGC=150", fmt.Sprintf("http://127.0.0.1:%d/metrics", own), 150},
	} {
		var got float64
		c.waitFor(p.name+"'s /metrics", 30*time.Second, func() bool {
			got = gauge(p.url, "go_gc_gogc_percent")
			return got >= 0
		})
		if got != p.want {
			t.Errorf("%s: go_gc_gogc_percent %v, want %v", p.name, got, p.want)
		}
	}
}
