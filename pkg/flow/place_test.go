package flow_test

import (
	"context"
	"testing"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/session"
)

// TestLocalPlacesAgentSteps: on the in-process runtime, an agent step
// whose spec has a sandbox block forwards its input placed there (op
// place, keyed by the step), an agent without one forwards its input as
// it is, and running the workflow again with the same run id records
// nothing new.
func TestLocalPlacesAgentSteps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := session.NewMemoryGraph()
	in, err := session.FromUserMessage(ctx, g, "go")
	if err != nil {
		t.Fatal(err)
	}
	boxed := scriptedSpec("boxed", "x", "boxed")
	boxed.Sandbox = &agent.Sandbox{Backend: "docker", Image: "rath-sandbox:busybox"}
	wf := flow.Sequence{&flow.Agent{Spec: scriptedSpec("plain", "plain")}, &flow.Agent{Spec: boxed}}
	rt, err := flow.NewLocal("r1", scriptedEnv())
	if err != nil {
		t.Fatal(err)
	}
	out, err := flow.Run(ctx, rt, wf, in)
	if err != nil {
		t.Fatal(err)
	}
	placed, err := g.Get(ctx, out.Version().Parents[0])
	if err != nil {
		t.Fatal(err)
	}
	if placed.Op != session.OpPlace || placed.Placement.Backend != "docker" || placed.Placement.Spec.Image != "rath-sandbox:busybox" {
		t.Fatalf("boxed's input = %s on %+v, want op place on docker", placed.Op, placed.Placement)
	}
	plainOut, err := g.Get(ctx, placed.Parents[0])
	if err != nil {
		t.Fatal(err)
	}
	if plainOut.Placement.Backend != "" || len(plainOut.Parents) != 1 || plainOut.Parents[0] != in.ID() {
		t.Errorf("plain's output %+v: want unplaced, forwarded from the input", plainOut)
	}
	if want := flow.PlaceKey(flow.StepID("r1", out.Version().Key[len("r1/"):])); placed.Key != want {
		t.Errorf("place key %q, want %q", placed.Key, want)
	}
	n := len(g.Versions())
	again, err := flow.Run(ctx, rt, wf, in)
	if err != nil || again.ID() != out.ID() || len(g.Versions()) != n {
		t.Errorf("re-run: %v, %v, %d versions (was %d); want the same output and nothing new", again.ID(), err, len(g.Versions()), n)
	}
	// Compressors and selectors run no tools: no placement.
	if _, ok := (flow.Call{Kind: flow.KindCompress, Agent: boxed}).Placement(); ok {
		t.Error("a compressor's call asks for a placement")
	}
}
