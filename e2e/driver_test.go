package e2e

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/runs"
)

var (
	driverOnce sync.Once
	driverErr  error
)

// driverBin builds e2e/testdata/driver (a user's Go program driving a
// workflow through pkg/flow/cluster) next to the other binaries.
func driverBin(t *testing.T) {
	t.Helper()
	dir := filepath.Dir(bin(t, "coordinator"))
	driverOnce.Do(func() {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "driver"), "./e2e/testdata/driver")
		cmd.Dir = ".."
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			driverErr = fmt.Errorf("go build driver: %w\n%s", err, out.String())
		}
	})
	if driverErr != nil {
		t.Fatal(driverErr)
	}
}

var driverRunLine = regexp.MustCompile(`(?m)^run (\S+)$`)

// TestDriverKilledMidWorkflow SIGKILLs a user's Go program driving a
// six-step workflow through pkg/flow/cluster while a step runs, and starts
// it again on the same run: the run completes, every step committed once
// after one attempt, the model was asked once per step (never again for a
// step that had committed), and the invariant checker finds nothing.
func TestDriverKilledMidWorkflow(t *testing.T) {
	t.Parallel()
	const steps = 6
	delays := map[string]time.Duration{}
	for i := 1; i <= steps; i++ {
		delays[fmt.Sprintf("STEP%d", i)] = 700 * time.Millisecond
	}
	m := newModelCounter(t, delays)
	c := newCluster(t, clusterConfig{workers: 2, env: m.env()})
	driverBin(t)

	d1 := c.add("driver", "--server", c.server, "--steps", fmt.Sprint(steps))
	d1.start(t)
	var runID string
	c.waitFor("the driver's run", 30*time.Second, func() bool {
		if m := driverRunLine.FindStringSubmatch(d1.output()); m != nil {
			runID = m[1]
			return true
		}
		return !d1.running()
	})
	if runID == "" {
		t.Fatalf("driver exited without a run:\n%s", d1.output())
	}
	// Kill it while a step runs, after some have committed.
	var before runs.Run
	c.waitFor("3 steps committed and the 4th running", 60*time.Second, func() bool {
		r, err := c.run(runID)
		if err != nil {
			return false
		}
		before = r
		return len(r.Steps) == 4 && r.Steps[3].Status == runs.StepRunning
	})
	d1.kill(t)
	if strings.Contains(d1.output(), "done") {
		t.Fatalf("the driver finished before the kill:\n%s", d1.output())
	}
	committed := map[string]bool{}
	for _, st := range before.Steps {
		if st.Status == runs.StepCommitted {
			committed[st.Key] = true
		}
	}
	t.Logf("driver killed with %d steps committed, step %s running", len(committed), before.Steps[3].Key)

	d2 := c.add("driver", "--server", c.server, "--run", runID, "--steps", fmt.Sprint(steps))
	d2.start(t)
	c.waitFor("the restarted driver to finish", 90*time.Second, func() bool { return !d2.running() })
	if d2.err != nil || !strings.Contains(d2.output(), "done") {
		t.Fatalf("restarted driver: %v\n%s", d2.err, d2.output())
	}
	if got := driverRunLine.FindStringSubmatch(d2.output()); got == nil || got[1] != runID {
		t.Fatalf("restarted driver ran %v, want run %s", got, runID)
	}
	r := c.waitRun(runID, 30*time.Second, "an end", func(r runs.Run) bool { return r.Status.Terminal() })
	if r.Status != runs.RunSucceeded {
		t.Fatalf("run %s: %s", r.Status, r.Error)
	}
	if len(r.Steps) != steps {
		t.Fatalf("%d steps, want %d", len(r.Steps), steps)
	}
	for _, st := range r.Steps {
		if committed[st.Key] && st.Status != runs.StepCommitted {
			t.Errorf("step %s committed before the kill is %s now", st.Key, st.Status)
		}
	}
	c.checkOncePerStep(c.graph(), r)
	for i := 1; i <= steps; i++ {
		if n := m.count(fmt.Sprintf("STEP%d", i)); n != 1 {
			t.Errorf("STEP%d: %d model requests, want 1", i, n)
		}
	}
	c.checkInvariants()
}
