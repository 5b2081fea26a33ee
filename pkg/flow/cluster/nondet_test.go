package cluster_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/flow/cluster"
	"github.com/rath-run/rath/pkg/llm/llmtest"
)

// TestChangedWorkflowIsNondeterministic: a driver dies after a workflow's
// first step; its workflow changes (the step's agent gets other
// instructions) and a new driver re-executes it on the run. The changed
// step fails with flow.ErrNondeterministic naming its key and both
// digests, and the run fails; once the run accepts changes it is reopened
// and the re-executed workflow keeps the recorded step and goes on.
func TestChangedWorkflowIsNondeterministic(t *testing.T) {
	t.Parallel()
	srv, env := fakeModel(t)
	srv.Handle(func(r llmtest.Request) llmtest.Reply { return llmtest.Reply{Content: "ok"} })
	c := startStack(t, 1, env)
	ctx := context.Background()
	rt, in, err := cluster.Start(ctx, c, client.WorkflowRequest{Message: "go"})
	if err != nil {
		t.Fatal(err)
	}
	draft := writer("draft")
	// The first driver runs the first step and "dies".
	if _, err := flow.Run(ctx, rt, flow.NewAgent(draft, ""), in); err != nil {
		t.Fatal(err)
	}
	run, err := c.GetRun(ctx, rt.RunID())
	if err != nil || len(run.Steps) != 1 || run.Steps[0].Digest == "" {
		t.Fatalf("run after the first step = %+v, %v; want one step with a digest", run.Steps, err)
	}
	recorded := run.Steps[0]

	// The workflow changed: the first step's agent has other instructions.
	changed := draft
	changed.Instructions = "Write two lines."
	wf := flow.Seq(flow.NewAgent(changed, ""), flow.NewAgent(writer("editor"), ""))
	reexecute := func() (*cluster.Runtime, error) {
		t.Helper()
		rt2, err := cluster.Open(ctx, c, rt.RunID())
		if err != nil {
			t.Fatal(err)
		}
		in2, err := rt2.Input(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = rt2.Run(ctx, wf, in2)
		return rt2, err
	}
	rt2, err := reexecute()
	if !errors.Is(err, flow.ErrNondeterministic) || !errors.Is(err, client.ErrNondeterministic) {
		t.Fatalf("re-executing a changed workflow = %v, want ErrNondeterministic", err)
	}
	for _, want := range []string{"step " + recorded.Key, recorded.Digest, "--accept-changes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if got := len(srv.Requests()); got != 1 {
		t.Fatalf("%d model requests, want 1: the changed step must not run", got)
	}
	failed, err := c.GetRun(ctx, rt.RunID())
	if err != nil || failed.Status != api.RunFailed || !strings.Contains(failed.Error, recorded.Key) {
		t.Fatalf("run = %s %q, %v; want failed naming the step", failed.Status, failed.Error, err)
	}

	// Accepting the change reopens the run; the re-executed workflow keeps
	// the recorded step and runs the new one.
	if err := rt2.AcceptChanges(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := reexecute(); err != nil {
		t.Fatalf("re-executing after accepting changes: %v", err)
	}
	if got := len(srv.Requests()); got != 2 {
		t.Fatalf("%d model requests in all, want 2 (the recorded step kept, the editor run)", got)
	}
	done, err := c.GetRun(ctx, rt.RunID())
	if err != nil || done.Status != api.RunSucceeded || done.ChangesAcceptedAt == nil {
		t.Fatalf("run = %s (accepted at %v), %v; want succeeded with the acceptance recorded", done.Status, done.ChangesAcceptedAt, err)
	}
	if done.Steps[0].Digest != recorded.Digest {
		t.Fatalf("the kept step's digest changed: %s, was %s", done.Steps[0].Digest, recorded.Digest)
	}
}
