package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/trainset"
)

// rolloutFile forks the task three ways; each solver writes answer.txt
// (or not) with the builtin tools, and the verifier scores the branch in
// its workspace: JSON stdout for a file, exit code 1 (0.0) without one.
const rolloutFile = `
agents:
  right:
    model: scripted
    tools: [builtin]
    script:
      - tool_calls: [{function: {name: write_workspace_file, arguments: {path: answer.txt, content: "42"}}}]
      - "42 it is"
  wrong:
    model: scripted
    tools: [builtin]
    script:
      - tool_calls: [{function: {name: write_workspace_file, arguments: {path: answer.txt, content: "41"}}}]
      - "41 it is"
  none:
    model: scripted
    tools: [builtin]
    script: ["no idea"]
steps:
  - rollout:
      branches: [right, wrong, none]
      verifier:
        command: |
          test -f answer.txt || exit 1
          if [ "$(cat answer.txt)" = 42 ]; then echo '{"score": 1}'; else echo '{"score": 0.5}'; fi
`

// TestDeclarativeRollout runs a rollout step driven by the coordinator on
// the dev stack's workers, on SQLite and Postgres: every branch gets an
// agent step and a verify step whose version holds the verifier's score
// (the label chunk, by "verifier"), read from the branch's own workspace;
// the run's output is the best branch; the pairs export ranks the
// branches by those scores; and a strict replay of the run reproduces
// every step, the verify steps from their recorded scores.
func TestDeclarativeRollout(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		testDeclarativeRollout(t, startDev(t, "", app.DevConfig{Workers: 2}))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		testDeclarativeRollout(t, startDev(t, testdb.Postgres(t), app.DevConfig{Workers: 2}))
	})
}

func testDeclarativeRollout(t *testing.T, s *stack) {
	ctx := context.Background()
	r, err := s.cl.StartWorkflow(ctx, client.WorkflowRequest{Workflow: rolloutFile, Message: "What is 6 x 7? Save it in answer.txt."})
	if err != nil {
		t.Fatal(err)
	}
	r = waitClientRun(t, s.cl, r.ID)
	if r.Status != "succeeded" {
		t.Fatalf("run %s: %s", r.Status, r.Error)
	}
	if len(r.Steps) != 6 {
		t.Fatalf("%d steps, want 3 agent and 3 verify steps: %+v", len(r.Steps), r.Steps)
	}
	want := map[string]float64{"1.b0.2": 1, "1.b1.2": 0.5, "1.b2.2": 0}
	outputs := map[string]session.ID{}
	for _, st := range r.Steps {
		key := st.Key
		if st.Output == nil {
			t.Fatalf("step %s has no output", key)
		}
		outputs[key] = *st.Output
	}
	for key, score := range want {
		id, ok := outputs[key]
		if !ok {
			t.Fatalf("no verify step %s among %v", key, outputs)
		}
		v, err := s.dev.Backend.Store.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		agentOut := outputs[strings.TrimSuffix(key, ".2")+".1"]
		if v.Base == nil || *v.Base != agentOut || len(v.Chunks) != 1 {
			t.Fatalf("verify %s: version %s (base %v, %d chunks) does not extend the agent's output %s with one chunk", key, id, v.Base, len(v.Chunks), agentOut)
		}
		l, ok := trainset.LabelOf(v.Chunks[0])
		if !ok || l.By != trainset.VerifierBy || l.Score == nil || *l.Score != score {
			t.Errorf("verify %s: label %+v (ok %v), want score %v by verifier", key, l, ok, score)
		}
	}
	if r.Output == nil || *r.Output != outputs["1.b0.1"] {
		t.Errorf("run output %v, want the best branch's output %s", r.Output, outputs["1.b0.1"])
	}

	// The scores rank the branches: right > wrong > none.
	var buf bytes.Buffer
	stats, err := s.cl.ExportPairs(ctx, api.ExportPairsRequest{Run: r.ID, From: []string{"scores"}}, &buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Written != 3 {
		t.Fatalf("pairs: %+v\n%s", stats, buf.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var p trainset.Pair
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			t.Fatal(err)
		}
		if p.Provenance.Source != trainset.FromScores || *p.Provenance.ChosenLabel.Score <= *p.Provenance.RejectedLabel.Score {
			t.Errorf("pair %+v", p.Provenance)
		}
	}
	if _, err := s.cl.ExportPairs(ctx, api.ExportPairsRequest{Run: r.ID, From: []string{"votes"}}, &buf, nil); err == nil || !strings.Contains(err.Error(), `"votes"`) {
		t.Errorf("from votes: %v", err)
	}

	// A strict replay re-executes every step from its recording.
	rep, err := s.cl.ReplayRun(ctx, r.ID, api.RunReplayRequest{Strict: true})
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	verifies := 0
	for _, row := range rep.Steps {
		if row.Kind != "verify" {
			continue
		}
		verifies++
		if !row.Identical || row.Replay == nil {
			t.Errorf("replayed verify step %+v", row)
			continue
		}
		v, err := s.dev.Backend.Store.Get(ctx, *row.Replay)
		if err != nil {
			t.Fatal(err)
		}
		orig, err := s.dev.Backend.Store.Get(ctx, row.Original)
		if err != nil {
			t.Fatal(err)
		}
		if v.Op != session.OpReplay || len(v.Chunks) != 1 || v.Chunks[0].Hash() != orig.Chunks[0].Hash() {
			t.Errorf("replay of %s: op %s, chunks %d", row.Key, v.Op, len(v.Chunks))
		}
	}
	if !rep.Identical || verifies != 3 || len(rep.Steps) != 6 {
		t.Fatalf("replay: identical %v, %d verify rows, %d rows: %+v", rep.Identical, verifies, len(rep.Steps), rep)
	}

	// A rerun from the silent branch's step with a solver that answers:
	// the new run's verifier scores that branch 1.
	fixed := json.RawMessage(`{"model": "scripted", "tools": ["builtin"], "script": [{"tool_calls": [{"function": {"name": "write_workspace_file", "arguments": {"path": "answer.txt", "content": "42"}}}]}, {"content": "42 now"}]}`)
	re, err := s.cl.RerunRun(ctx, r.ID, api.RunRerunRequest{From: "1.b2.1", Agents: map[string]json.RawMessage{"none": fixed}})
	if err != nil {
		t.Fatalf("rerun: %v", err)
	}
	re = waitClientRun(t, s.cl, re.ID)
	if re.Status != "succeeded" {
		t.Fatalf("rerun %s: %s", re.Status, re.Error)
	}
	for _, st := range re.Steps {
		if st.Key != "1.b2.2" {
			continue
		}
		v, err := s.dev.Backend.Store.Get(ctx, *st.Output)
		if err != nil {
			t.Fatal(err)
		}
		if l, ok := trainset.LabelOf(v.Chunks[0]); !ok || *l.Score != 1 {
			t.Fatalf("rerun's verify of the fixed branch: %+v", l)
		}
		return
	}
	t.Fatalf("rerun %s has no step 1.b2.2: %+v", re.ID, re.Steps)
}

// TestDeclarativeRolloutSelector: a rollout with a verifier and a
// selector, driven by the coordinator: the selector's choice (the wrong
// answer here) is the output although it scored lower, its decision names
// the branch versions, pairs come from both, each naming its source, and
// a strict replay reproduces the decision.
func TestDeclarativeRolloutSelector(t *testing.T) {
	t.Parallel()
	s := startDev(t, "", app.DevConfig{Workers: 2})
	ctx := context.Background()
	file := strings.Replace(rolloutFile, "steps:\n", "  judge:\n    model: scripted\n    script: [\"1\"]\nsteps:\n", 1)
	file = strings.Replace(file, "      branches: [right, wrong, none]\n", "      branches: [right, wrong, none]\n      selector: judge\n", 1)
	r, err := s.cl.StartWorkflow(ctx, client.WorkflowRequest{Workflow: file, Message: "What is 6 x 7? Save it in answer.txt."})
	if err != nil {
		t.Fatal(err)
	}
	r = waitClientRun(t, s.cl, r.ID)
	if r.Status != "succeeded" || len(r.Steps) != 7 {
		t.Fatalf("run %s (%s) with %d steps, want succeeded with 3 agent, 3 verify and 1 select steps", r.Status, r.Error, len(r.Steps))
	}
	outputs := map[string]session.ID{}
	for _, st := range r.Steps {
		outputs[st.Key] = *st.Output
	}
	if r.Output == nil || *r.Output != outputs["1.b1.1"] {
		t.Fatalf("output %v, want the selected branch %s", r.Output, outputs["1.b1.1"])
	}
	var buf bytes.Buffer
	stats, err := s.cl.ExportPairs(ctx, api.ExportPairsRequest{Run: r.ID, From: []string{"selector", "scores"}}, &buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	bySource := map[trainset.PairSource]int{}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var p trainset.Pair
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			t.Fatal(err)
		}
		bySource[p.Provenance.Source]++
		if p.Provenance.Source == trainset.FromSelector &&
			(p.Provenance.Chosen.VersionID != outputs["1.b1.1"] || p.Provenance.SelectorDecision == nil || *p.Provenance.SelectorDecision != outputs["2"]) {
			t.Errorf("selector pair %+v", p.Provenance)
		}
	}
	if bySource[trainset.FromSelector] != 2 || bySource[trainset.FromScores] != 3 || stats.Decisions != 1 {
		t.Fatalf("pairs by source %v, stats %+v", bySource, stats)
	}
	rep, err := s.cl.ReplayRun(ctx, r.ID, api.RunReplayRequest{Strict: true})
	if err != nil || !rep.Identical || len(rep.Steps) != 7 {
		t.Fatalf("replay: %v, %+v", err, rep)
	}
}
