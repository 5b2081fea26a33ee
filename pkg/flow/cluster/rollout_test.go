package cluster_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/flow/cluster"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/tool/builtin"
)

// solver is a scripted agent that writes content to answer.txt with the
// builtin tools (nothing when content is empty), then replies.
func solver(name, content string) *flow.Agent {
	spec := agent.Spec{Name: name, Model: "scripted", Tools: []string{"builtin"}}
	if content != "" {
		args, _ := json.Marshal(map[string]string{"path": "answer.txt", "content": content})
		spec.Script = append(spec.Script, llm.ScriptReply{ToolCalls: []session.ToolCall{{Type: "function",
			Function: session.FunctionCall{Name: builtin.WriteWorkspaceFile, Arguments: string(args)}}}})
	}
	spec.Script = append(spec.Script, llm.ScriptReply{Content: name + " done"})
	return flow.NewAgent(spec, "")
}

// TestRolloutOnCluster drives a flow.Rollout from a Go program on the
// cluster (client-driven steps, PUT …/steps/{key}): the verify steps run
// on workers, in each branch's workspace, and a second driver on the same
// run reuses every agent and verify step.
func TestRolloutOnCluster(t *testing.T) {
	t.Parallel()
	c := startStack(t, 2, nil)
	ctx := context.Background()
	rt, in, err := cluster.Start(ctx, c, client.WorkflowRequest{Message: "6 x 7?"})
	if err != nil {
		t.Fatal(err)
	}
	r := &flow.Rollout{
		Branches: []*flow.Agent{solver("wrong", "41"), solver("right", "42"), solver("silent", "")},
		Verifier: flow.Verifier{Command: `test "$(cat answer.txt 2>/dev/null)" = 42`},
	}
	var res []flow.RolloutResult
	wf := flow.Func(func(ctx context.Context, s session.Session) (session.Session, error) {
		var err error
		if res, err = r.Run(ctx, s); err != nil {
			return session.Session{}, err
		}
		return res[1].Output, nil
	})
	if _, err := rt.Run(ctx, wf, in); err != nil {
		t.Fatal(err)
	}
	for i, want := range []float64{0, 1, 0} {
		if res[i].Score != want {
			t.Errorf("branch %d: score %v, want %v", i, res[i].Score, want)
		}
	}
	run, err := c.GetRun(ctx, rt.RunID())
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != "succeeded" || len(run.Steps) != 6 {
		t.Fatalf("run %s with %d steps, want succeeded with 6", run.Status, len(run.Steps))
	}
	// A second driver re-executes the rollout: the same versions come back.
	rt2, err := cluster.Open(ctx, c, rt.RunID())
	if err != nil {
		t.Fatal(err)
	}
	again, err := r.Run(flow.Root(flow.WithRuntime(ctx, rt2)), in)
	if err != nil {
		t.Fatal(err)
	}
	for i := range again {
		if again[i].Scored.ID() != res[i].Scored.ID() {
			t.Errorf("branch %d: re-executed verify step %s, recorded %s", i, again[i].Scored.ID(), res[i].Scored.ID())
		}
	}
	if run, err = c.GetRun(ctx, rt.RunID()); err != nil || len(run.Steps) != 6 {
		t.Fatalf("after the second driver: %d steps (%v), want the same 6", len(run.Steps), err)
	}
}
