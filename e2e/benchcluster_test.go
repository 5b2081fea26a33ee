package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/bench"
	"github.com/rath-run/rath/internal/testdb"
)

// TestBenchClusterScript runs `make bench-cluster`'s script as the
// performance notes do, briefly, on this test's binaries: it must start
// the cluster (its own Postgres with pg_stat_statements, nats-server, a
// coordinator with auth, a worker as rath_worker), report CPU a step for
// every process and the statements a step, and leave the statement table
// and NATS' connection figures beside the report. The figures are not
// judged: a test must not time a benchmark.
func TestBenchClusterScript(t *testing.T) {
	t.Parallel()
	testdb.AdminURL(t) // the script starts its own Postgres from the same installation
	bins := t.TempDir()
	for _, name := range []string{"coordinator", "worker", "rathctl"} {
		if err := os.Symlink(bin(t, name), filepath.Join(bins, name)); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.Command("go", "build", "-o", filepath.Join(bins, "nats-server"), "github.com/nats-io/nats-server/v2")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build nats-server: %v\n%s", err, out)
	}
	// The script's Postgres lives outside the test's temporary directory:
	// its owner, postgres, must be able to reach it.
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	pgdir := filepath.Join(os.TempDir(), "rath-bench-cluster-test-"+hex.EncodeToString(suffix))
	t.Cleanup(func() {
		stop := exec.Command("scripts/testpg.sh", "stop")
		stop.Dir = ".."
		stop.Env = append(os.Environ(), "RATH_TEST_PG_DIR="+pgdir)
		if out, err := stop.CombinedOutput(); err != nil {
			t.Logf("stop the script's Postgres: %v\n%s", err, out)
		}
	})
	out := t.TempDir()
	cmd := exec.Command("scripts/bench-cluster.sh")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "BIN="+bins, "OUT="+out, "PGDIR="+pgdir,
		"DURATION=1s", "WARM=1s", "SLOTS=4", "CONCURRENCY=4")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("bench-cluster.sh: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	t.Logf("bench-cluster.sh ran in %v", time.Since(start).Round(time.Second))

	run := filepath.Join(out, "run1")
	b, err := os.ReadFile(filepath.Join(run, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r bench.Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("report.json: %v", err)
	}
	for _, want := range []string{"coordinator (pid:", "worker1 (pid:", "nats (pid:", "postgres: backends", "total"} {
		j := slices.IndexFunc(r.CPU, func(p bench.ProcessCPU) bool { return strings.HasPrefix(p.Process, want) })
		if j < 0 || r.CPU[j].NA != "" || !(r.CPU[j].PerStepUS > 0) {
			t.Errorf("CPU per step of %q: not measured (all: %+v)", want, r.CPU)
		}
	}
	if !slices.ContainsFunc(r.Figures, func(f bench.Figure) bool {
		return strings.HasPrefix(f.Name, "Postgres statements per step") && f.Value > 0
	}) {
		t.Errorf("no statements per step: pg_stat_statements not loaded? figures: %+v", r.Figures)
	}
	if !strings.Contains(stdout.String(), "CPU PER STEP") {
		t.Errorf("the table was not printed:\n%s", stdout.String())
	}
	stmts, err := os.ReadFile(filepath.Join(run, "statements.txt"))
	if err != nil || !bytes.Contains(stmts, []byte("INSERT INTO steps")) {
		t.Errorf("statements.txt (%v) holds no statement of a step:\n%s", err, stmts)
	}
	var connz struct {
		Conns []struct {
			InMsgs int64 `json:"in_msgs"`
		} `json:"connections"`
	}
	b, err = os.ReadFile(filepath.Join(run, "connz.json"))
	if err == nil {
		err = json.Unmarshal(b, &connz)
	}
	if err != nil || len(connz.Conns) == 0 {
		t.Errorf("connz.json: %v, %d connections", err, len(connz.Conns))
	}
}
