package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/bench"
)

// TestBenchAgainstACluster: `rathctl bench --server` as an operator runs
// it against a deployment of separate processes with auth on, naming the
// processes with --process (the coordinator's and the worker's /metrics,
// the NATS server's pid): the steps scenario reports each one's CPU per
// step and the total with the Postgres backends'.
func TestBenchAgainstACluster(t *testing.T) {
	t.Parallel()
	health := freePort(t)
	c := newCluster(t, clusterConfig{workers: 1, token: "bench-admin-token-0123456789",
		workerArgs: []string{"--health", fmt.Sprintf("127.0.0.1:%d", health), "--slots", "8"}})
	out, err := c.rathctl("bench", "--server", c.server, "--store", c.storeURL, "--nats", c.natsURL,
		"--scenario", "steps", "--duration", "2s",
		"--process", "coordinator="+c.server+"/metrics",
		"--process", fmt.Sprintf("w1=http://127.0.0.1:%d/metrics", health),
		"--process", fmt.Sprintf("nats=pid:%d", c.nats.cmd.Process.Pid),
		"-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var r bench.Report
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("bench -o json: %v\n%s", err, out)
	}
	for _, want := range []string{"coordinator (http://", "w1 (http://", "nats (pid:", "postgres: backends", "total"} {
		j := slices.IndexFunc(r.CPU, func(p bench.ProcessCPU) bool { return strings.HasPrefix(p.Process, want) })
		if j < 0 || r.CPU[j].NA != "" || !(r.CPU[j].PerStepUS > 0) {
			t.Errorf("CPU per step of %q: not measured (all: %+v)", want, r.CPU)
		}
	}
	if !slices.ContainsFunc(r.Figures, func(f bench.Figure) bool {
		return f.Name == "CPU per step, loaded, the processes named + Postgres backends" && f.Value > 0
	}) {
		t.Errorf("no CPU per step figure for the cluster: %+v", r.Figures)
	}
}
