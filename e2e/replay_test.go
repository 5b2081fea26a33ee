package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/api"
)

// replayWorkflow is a 3-way fan-out → merge → compress → select → agent
// workflow. The router chooses the writer, then none; the fake model
// names each request's agent by the first word of its instructions.
const replayWorkflow = `
agents:
  branch: {model: gpt-test, instructions: BRANCH answer briefly}
  squeeze: {model: gpt-test, instructions: SQUEEZE the conversation}
  router: {model: gpt-test, instructions: ROUTER pick the next agent}
  writer: {model: gpt-test, instructions: WRITER drafts, description: writes the answer}
  critic: {model: gpt-test, instructions: CRITIC reviews, description: criticises the draft}
  closer: {model: gpt-test, instructions: CLOSER signs off}
steps:
  - fork: {n: 3, agent: branch}
  - compress: squeeze
  - select: {selector: router, candidates: [writer, critic], max_rounds: 3}
  - agent: closer
`

// TestReplayWholeRun runs replayWorkflow on a coordinator and a worker
// (separate processes, Postgres, auth on), then replays the whole run
// with rathctl replay --run --strict: every step comes out with the
// recorded hashes and the model gets no request. A tampered recording
// fails the strict replay naming the step.
func TestReplayWholeRun(t *testing.T) {
	t.Parallel()
	m := newModelCounter(t, nil)
	m.reply = func(agent string, n int) string {
		switch {
		case agent == "ROUTER" && n == 1:
			return "0"
		case agent == "ROUTER":
			return "-1"
		case agent == "SQUEEZE":
			return "the branches agreed"
		}
		return "reply from " + agent
	}
	c := newCluster(t, clusterConfig{workers: 1, env: m.env(), token: "e2e-replay-bootstrap-0123456789"})
	r := c.submitWorkflow(replayWorkflow, "replay me")
	r = c.waitRun(r.ID, 120*time.Second, "an end", func(r runs.Run) bool { return r.Status.Terminal() })
	if r.Status != runs.RunSucceeded {
		t.Fatalf("run %s: %s", r.Status, r.Error)
	}
	// 3 branches, compress, select (writer), writer, select (none), closer.
	if len(r.Steps) != 8 {
		t.Fatalf("%d steps, want 8", len(r.Steps))
	}
	before := m.total()
	if before != 8 {
		t.Fatalf("the run made %d model requests, want 8", before)
	}

	out, err := c.rathctl("replay", "--run", r.ID, "--strict", "-o", "json")
	if err != nil {
		t.Fatalf("strict replay: %v\n%s", err, out)
	}
	var rep api.RunReplayReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("replay output %q: %v", out, err)
	}
	if !rep.Identical || rep.Replay == nil || *rep.Replay == *r.Output {
		t.Fatalf("report: %+v", rep)
	}
	kinds := map[string]int{}
	for _, row := range rep.Steps {
		kinds[row.Kind]++
		if !row.Identical || row.Replay == nil {
			t.Errorf("step %s (%s): %+v", row.Key, row.Kind, row)
		}
	}
	if kinds["agent"] != 5 || kinds["compress"] != 1 || kinds["select"] != 2 || kinds["merge"] != 2 {
		t.Errorf("replayed rows by kind %v; want 5 agent, 1 compress, 2 select, 2 merge", kinds)
	}
	if n := m.total() - before; n != 0 {
		t.Fatalf("the replay made %d model requests, want 0", n)
	}
	// The replayed output has the original's transcript.
	g := c.graph()
	ctx := context.Background()
	oc, err := g.Transcript(ctx, *r.Output)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := g.Transcript(ctx, *rep.Replay)
	if err != nil {
		t.Fatal(err)
	}
	if len(oc) != len(rc) {
		t.Fatalf("replayed transcript has %d chunks, the original %d", len(rc), len(oc))
	}
	for i := range oc {
		if oc[i].Hash() != rc[i].Hash() {
			t.Errorf("chunk %d: %s, original %s", i, rc[i].Hash(), oc[i].Hash())
		}
	}
	// The table form, and the same replay from the store directly.
	out, err = c.rathctl("replay", "--run", r.ID)
	if err != nil || !strings.Contains(string(out), "identical=true") || !strings.Contains(string(out), "compress") {
		t.Fatalf("replay table: %v\n%s", err, out)
	}
	cmd := exec.Command(bin(t, "rathctl"), "replay", "--run", r.ID, "--strict", "--store", c.storeURL)
	cmd.Env = append(os.Environ(), "RATH_SERVER=", "RATH_TOKEN=", "RATH_STORE=")
	if b, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(b), "identical=true") {
		t.Fatalf("replay from the store: %v\n%s", err, b)
	}
	if n := m.total() - before; n != 0 {
		t.Fatalf("the replays made %d model requests, want 0", n)
	}

	// Tamper with the recording: the closer step's input is now the
	// run's input, so its recorded replies answer another transcript.
	var closer runs.Step
	for _, st := range r.Steps {
		if closer.ID == "" || st.Ordinal > closer.Ordinal {
			closer = st
		}
	}
	db := c.sqlDB()
	if _, err := db.Exec(`UPDATE steps SET input_id = $1 WHERE id = $2`, r.Input.String(), closer.ID); err != nil {
		t.Fatal(err)
	}
	out, err = c.rathctl("replay", "--run", r.ID, "--strict")
	if err == nil {
		t.Fatalf("strict replay of a tampered run succeeded:\n%s", out)
	}
	if msg := err.Error(); !strings.Contains(msg, "step "+closer.Key+" (agent)") || !strings.Contains(msg, "round 1") {
		t.Errorf("strict replay error %q does not name step %s and round 1", msg, closer.Key)
	}
	if n := m.total() - before; n != 0 {
		t.Fatalf("the replays made %d model requests, want 0", n)
	}
}
