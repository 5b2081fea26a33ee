package worker_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/worker"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
)

// submitCall records a one-step run whose target is call and publishes
// its job, as the coordinator does.
func (r *rig) submitCall(t *testing.T, in session.Session, call flow.Call) runs.Run {
	t.Helper()
	ctx := context.Background()
	target, err := json.Marshal(call)
	if err != nil {
		t.Fatal(err)
	}
	run := runs.Run{ID: runs.NewRunID(), Queue: bus.DefaultQueue, Target: target, Input: in.ID()}
	if err := r.runs.Create(ctx, &run, []runs.Step{{Input: in.ID()}}); err != nil {
		t.Fatal(err)
	}
	st := run.Steps[0]
	if _, err := r.bus.Publish(ctx, bus.Job{StepID: st.ID, RunID: run.ID, Queue: run.Queue, Input: in.ID().String(), Target: target}, nil); err != nil {
		t.Fatal(err)
	}
	return run
}

func scripted(name string, replies ...string) agent.Spec {
	s := agent.Spec{Name: name, Model: "scripted"}
	for _, r := range replies {
		s.Script = append(s.Script, llm.ScriptReply{Content: r})
	}
	return s
}

// TestWorkerRunsSelectAndCompress runs a selector call and a compressor
// call as step jobs on a real worker, embedded NATS and the SQLite store:
// the select step commits one selector_decision chunk with the choice, the
// compress step a compress version whose transcript is one summary.
func TestWorkerRunsSelectAndCompress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	r.startWorker(t, worker.Config{})
	in, err := session.FromUserMessage(ctx, r.graph, "my invoice is wrong")
	if err != nil {
		t.Fatal(err)
	}
	in, err = in.Append(ctx, session.Assistant("Let me look."))
	if err != nil {
		t.Fatal(err)
	}

	sel := r.submitCall(t, in, flow.Call{Kind: flow.KindSelect, Agent: scripted("router", "unused", "I pick 1, billing."),
		Candidates: []string{"writes replies", "handles billing"}})
	run := r.waitRun(t, sel.ID)
	if run.Status != runs.RunSucceeded {
		t.Fatalf("select run %s: %s", run.Status, run.Error)
	}
	out, err := session.Open(ctx, r.graph, *run.Output)
	if err != nil {
		t.Fatal(err)
	}
	d, err := flow.DecisionOf(out)
	if err != nil {
		t.Fatal(err)
	}
	if d.Choice != 1 || d.Reply != "I pick 1, billing." || len(d.Candidates) != 2 || d.Selector != "router" {
		t.Fatalf("decision %+v, want choice 1 of 2 with the raw reply", d)
	}
	if out.Op() != session.OpStep || out.Len() != in.Len()+1 || out.Version().Key != run.Steps[0].ID {
		t.Fatalf("select version: op %s len %d key %q, want step, %d, %q", out.Op(), out.Len(), out.Version().Key, in.Len()+1, run.Steps[0].ID)
	}

	cmp := r.submitCall(t, in, flow.Call{Kind: flow.KindCompress, Agent: scripted("squash", "unused", "A customer disputes an invoice.")})
	run = r.waitRun(t, cmp.ID)
	if run.Status != runs.RunSucceeded {
		t.Fatalf("compress run %s: %s", run.Status, run.Error)
	}
	out, err = session.Open(ctx, r.graph, *run.Output)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := out.Chunks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if out.Op() != session.OpCompress || len(cs) != 1 || cs[0].Kind() != session.KindSummary ||
		!json.Valid(cs[0].Payload()) || out.Parents()[0] != in.ID() || out.Version().Base != nil {
		t.Fatalf("compress version op %s parents %v base %v chunks %v", out.Op(), out.Parents(), out.Version().Base, cs)
	}
	var body struct{ Content string }
	if err := json.Unmarshal(cs[0].Payload(), &body); err != nil || body.Content != "A customer disputes an invoice." {
		t.Fatalf("summary payload %s", cs[0].Payload())
	}
}

// TestWorkerFailsBadCall records an invalid call (a select without
// candidates) as a permanent failure naming the field.
func TestWorkerFailsBadCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	r.startWorker(t, worker.Config{})
	in, err := session.FromUserMessage(ctx, r.graph, "hi")
	if err != nil {
		t.Fatal(err)
	}
	run := r.submitCall(t, in, flow.Call{Kind: flow.KindSelect, Agent: scripted("router", "0")})
	run = r.waitRun(t, run.ID)
	if run.Status != runs.RunFailed || run.Steps[0].Attempts != 1 {
		t.Fatalf("run %s after %d attempts (%s), want failed after 1", run.Status, run.Steps[0].Attempts, run.Error)
	}
	if want := "candidates"; !strings.Contains(run.Error, want) {
		t.Fatalf("error %q does not name %q", run.Error, want)
	}
}
