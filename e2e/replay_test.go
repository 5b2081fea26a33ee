package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
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
	c, m, r := replayCluster(t)
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

	if out, err := c.rathctl("check"); err != nil {
		t.Errorf("check after the replays: %v\n%s", err, out)
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

// replayCluster starts a coordinator and a worker (Postgres, auth on)
// whose fake model counts requests per agent, and runs replayWorkflow to
// success.
func replayCluster(t *testing.T) (*cluster, *modelCounter, runs.Run) {
	t.Helper()
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
	return c, m, r
}

// TestRerunWholeRunFromSelect reruns replayWorkflow from its first select
// step with another model: the fan-out and the compression are kept (no
// new request for them), the select and what follows run live on the
// new model, and the original run is unchanged.
func TestRerunWholeRunFromSelect(t *testing.T) {
	t.Parallel()
	c, m, r := replayCluster(t)
	var sel runs.Step
	for _, st := range r.Steps {
		var call struct{ Kind string }
		if err := json.Unmarshal(st.Target, &call); err != nil {
			t.Fatal(err)
		}
		if call.Kind == "select" && (sel.ID == "" || st.Ordinal < sel.Ordinal) {
			sel = st
		}
	}
	before := map[string]int{}
	for _, a := range []string{"BRANCH", "SQUEEZE", "ROUTER", "WRITER", "CRITIC", "CLOSER"} {
		before[a] = m.count(a)
	}
	out, err := c.rathctl("rerun", "--run", r.ID, "--from", sel.Key, "--model", "gpt-other", "-o", "json")
	if err != nil {
		t.Fatalf("rerun: %v\n%s", err, out)
	}
	var nr runs.Run
	if err := json.Unmarshal(out, &nr); err != nil {
		t.Fatalf("rerun output %q: %v", out, err)
	}
	if nr.ID == r.ID || nr.Kind != runs.KindWorkflow {
		t.Fatalf("rerun run: %+v", nr)
	}
	nr = c.waitRun(nr.ID, 120*time.Second, "an end", func(r runs.Run) bool { return r.Status.Terminal() })
	if nr.Status != runs.RunSucceeded {
		t.Fatalf("rerun run %s: %s", nr.Status, nr.Error)
	}
	// Kept: the 3 branches and the compression, as committed, with the
	// original outputs.
	orig := map[string]runs.Step{}
	for _, st := range r.Steps {
		orig[st.Key] = st
	}
	kept := 0
	for _, st := range nr.Steps {
		o := orig[st.Key]
		if st.Ordinal < sel.Ordinal {
			kept++
			if st.Output == nil || o.Output == nil || *st.Output != *o.Output {
				t.Errorf("kept step %s: output %v, original %v", st.Key, st.Output, o.Output)
			}
		} else if st.Output != nil && o.Output != nil && *st.Output == *o.Output {
			t.Errorf("step %s from the select on was not re-executed", st.Key)
		}
	}
	if kept != 4 {
		t.Errorf("%d steps kept, want 4 (3 branches, compress)", kept)
	}
	if m.count("BRANCH") != before["BRANCH"] || m.count("SQUEEZE") != before["SQUEEZE"] {
		t.Errorf("the rerun asked the model for kept steps: branch %d→%d, squeeze %d→%d",
			before["BRANCH"], m.count("BRANCH"), before["SQUEEZE"], m.count("SQUEEZE"))
	}
	if m.count("ROUTER") <= before["ROUTER"] || m.count("CLOSER") != before["CLOSER"]+1 {
		t.Errorf("the rerun's live steps: router %d→%d, closer %d→%d; want new requests for both",
			before["ROUTER"], m.count("ROUTER"), before["CLOSER"], m.count("CLOSER"))
	}
	g := c.graph()
	v, err := g.Get(context.Background(), *nr.Output)
	if err != nil {
		t.Fatal(err)
	}
	if v.Producer.Model != "gpt-other" || v.Producer.Run != nr.ID {
		t.Errorf("rerun output made by run %s model %s; want run %s, gpt-other", v.Producer.Run, v.Producer.Model, nr.ID)
	}
	// The original run is unchanged.
	again, err := c.run(r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if again.Status != r.Status || *again.Output != *r.Output || len(again.Steps) != len(r.Steps) {
		t.Fatalf("original run changed: %+v", again)
	}
	for i, st := range again.Steps {
		if st.Status != r.Steps[i].Status || *st.Output != *r.Steps[i].Output {
			t.Errorf("original step %s changed: %+v", st.Key, st)
		}
	}
	if out, err := c.rathctl("verify", r.Output.String()); err != nil || !strings.Contains(string(out), "ok") {
		t.Errorf("verify the original output: %v\n%s", err, out)
	}
	// The invariants hold: the kept steps are exactly-once through the
	// original run's steps of their keys, the replays are no second commits.
	if out, err := c.rathctl("check"); err != nil {
		t.Errorf("check after the rerun: %v\n%s", err, out)
	}
	// --agent replaces one agent of the workflow for the rerun.
	spec := filepath.Join(c.dir, "closer2.yaml")
	if err := os.WriteFile(spec, []byte("name: closer\nmodel: gpt-test\ninstructions: CLOSER2 signs off differently\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = c.rathctl("rerun", "--run", r.ID, "--from", sel.Key, "--agent", "closer="+spec)
	if err != nil || !strings.Contains(string(out), "(4 steps kept)") {
		t.Fatalf("rerun --agent: %v\n%s", err, out)
	}
	id := strings.Fields(strings.SplitAfter(string(out), "new run ")[1])[0]
	if nr2 := c.waitRun(id, 120*time.Second, "an end", func(r runs.Run) bool { return r.Status.Terminal() }); nr2.Status != runs.RunSucceeded {
		t.Fatalf("rerun --agent run %s: %s", nr2.Status, nr2.Error)
	}
	if m.count("CLOSER2") != 1 || m.count("BRANCH") != before["BRANCH"] {
		t.Errorf("rerun --agent: closer2 asked %d times (want 1), branch %d→%d", m.count("CLOSER2"), before["BRANCH"], m.count("BRANCH"))
	}
	// A step the run does not have is refused, naming it.
	if _, err := c.rathctl("rerun", "--run", r.ID, "--from", "nope"); err == nil || !strings.Contains(err.Error(), `no step "nope"`) {
		t.Errorf("rerun from an unknown step: %v", err)
	}
}
