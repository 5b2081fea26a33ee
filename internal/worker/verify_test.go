package worker_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/sandbox/policy"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/trainset"
)

// runVerify forwards in through a verify step (a rollout's verifier) and
// returns the ended run.
func (r *policyRig) runVerify(t *testing.T, in session.ID, command string) runs.Run {
	t.Helper()
	ctx := context.Background()
	call := flow.Call{Kind: flow.KindVerify, Verifier: &flow.Verifier{Command: command},
		Agent: agent.Spec{Name: "solver", Model: "scripted", Script: []llm.ScriptReply{{Content: "x"}}}}
	target, err := json.Marshal(call)
	if err != nil {
		t.Fatal(err)
	}
	run := runs.Run{ID: runs.NewRunID(), Queue: "policy", Target: target, Input: in}
	if err := r.runs.Create(ctx, &run, []runs.Step{{Input: in}}); err != nil {
		t.Fatal(err)
	}
	st := run.Steps[0]
	if _, err := r.bus.Publish(ctx, bus.Job{StepID: st.ID, RunID: run.ID, Queue: run.Queue, Input: in.String(), Target: target}, nil); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "run "+run.ID+" to end", func() bool {
		if run, err = r.runs.Get(ctx, run.ID); err != nil {
			t.Fatal(err)
		}
		return run.Status.Terminal()
	})
	return run
}

// TestWorkerVerifyHeldToSandboxPolicy: a verifier runs in a sandbox under
// the operator's policy exactly as an agent's tools do: a placement the
// policy refuses fails the step at once, permanently, with no sandbox
// opened; an unplaced branch runs on the policy's default backend and its
// score is committed as the label chunk, by "verifier". A verifier that
// prints a JSON object of another shape fails the step for good.
func TestWorkerVerifyHeldToSandboxPolicy(t *testing.T) {
	t.Parallel()
	r := newPolicyRig(t, policy.Default(false, "rath-sandbox:busybox"))
	run := r.runVerify(t, r.placed(t, session.Placement{Backend: "local"}), "exit 0")
	if run.Status != runs.RunFailed || !strings.Contains(run.Error, `placement.backend: "local" is not allowed by the operator's sandbox policy`) ||
		run.Steps[0].Attempts != 1 {
		t.Fatalf("verify on a refused placement: %s (%s), %d attempts; want failed once naming placement.backend", run.Status, run.Error, run.Steps[0].Attempts)
	}
	if n, m := r.local.opens(), r.docker.opens(); n+m != 0 {
		t.Fatalf("a refused verifier opened %d local and %d docker sandboxes", n, m)
	}

	run = r.runVerify(t, r.placed(t, session.Placement{}), `echo '{"score": 0.75}'`)
	if run.Status != runs.RunSucceeded || r.docker.opens() != 1 || r.local.opens() != 0 {
		t.Fatalf("unplaced: run %s (%s), %d docker and %d local opens; want it verified on docker", run.Status, run.Error, r.docker.opens(), r.local.opens())
	}
	out, err := r.graph.Get(context.Background(), *run.Output)
	if err != nil {
		t.Fatal(err)
	}
	l, ok := trainset.LabelOf(out.Chunks[0])
	if len(out.Chunks) != 1 || !ok || l.By != trainset.VerifierBy || *l.Score != 0.75 || out.Producer.Agent != "solver" {
		t.Fatalf("verify output %+v: label %+v ok %v", out, l, ok)
	}

	run = r.runVerify(t, r.placed(t, session.Placement{}), `echo '{"points": 3}'`)
	if run.Status != runs.RunFailed || !strings.Contains(run.Error, "not {\"score\": N}") || run.Steps[0].Attempts != 1 {
		t.Fatalf("bad verifier output: %s (%s), %d attempts; want failed once", run.Status, run.Error, run.Steps[0].Attempts)
	}
}
