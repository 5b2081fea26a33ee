// Command driver is a user's Go program driving a workflow through
// pkg/flow/cluster, for the e2e tests: a sequence of --steps agent steps
// (agent STEP<i>, model gpt-test: the fake OpenAI server the workers call
// counts requests by the first word of the instructions).
//
//	driver --server URL [--run ID] [--steps N]
//
// Without --run it starts a new workflow run; with --run it re-executes the
// workflow on that run (cluster.Open), as a restarted driver does. It
// prints "run ID" as soon as the run is known, "step KEY" after each step's
// output came back, and "done" after the run was completed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/flow/cluster"
	"github.com/rath-run/rath/pkg/session"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "driver:", err)
		os.Exit(1)
	}
}

// printed wraps a step and prints its index once its output is back.
type printed struct {
	i    int
	step flow.Workflow
}

func (p printed) Forward(ctx context.Context, in session.Session) (session.Session, error) {
	out, err := p.step.Forward(ctx, in)
	if err == nil {
		fmt.Printf("step %d\n", p.i)
	}
	return out, err
}

func run() error {
	server := flag.String("server", "", "coordinator URL")
	runID := flag.String("run", "", "re-execute the workflow on this run (empty: start a new one)")
	steps := flag.Int("steps", 6, "agent steps in sequence")
	flag.Parse()
	ctx := context.Background()
	c, err := client.New(*server, "")
	if err != nil {
		return err
	}
	var (
		rt *cluster.Runtime
		in session.Session
	)
	if *runID == "" {
		rt, in, err = cluster.Start(ctx, c, client.WorkflowRequest{Message: "write six lines"})
	} else {
		rt, err = cluster.Open(ctx, c, *runID)
		if err == nil {
			in, err = rt.Input(ctx)
		}
	}
	if err != nil {
		return err
	}
	fmt.Printf("run %s\n", rt.RunID())
	wf := make(flow.Sequence, *steps)
	for i := range wf {
		spec := agent.Spec{Name: fmt.Sprintf("step%d", i+1), Model: "gpt-test",
			Instructions: fmt.Sprintf("STEP%d write one line.", i+1)}
		wf[i] = printed{i: i + 1, step: flow.NewAgent(spec, "")}
	}
	if _, err := rt.Run(ctx, wf, in); err != nil {
		return err
	}
	fmt.Println("done")
	return nil
}
