// Package cluster is the cluster runtime of package flow for a Go program:
// every agent, selector or compressor call of a workflow becomes a step job
// of a workflow run on the coordinator, executed by any worker, while the
// program (the driver) runs the workflow's Go code — its if, for, forks and
// merges — itself.
//
// The run is durable. Each step is recorded under its key (flow.NextKey)
// with PUT /v1/runs/{id}/steps/{key}, which is idempotent: a driver that
// dies and re-executes the same workflow with [Open] on the same run gets
// the steps that already committed back, without running them again, and
// continues. Workflow code must be deterministic given step results: each
// step records the digest of its input version and call
// (flow.StepDigest), and a re-executed step key that now gets another
// fails with an error matching flow.ErrNondeterministic, naming the key
// and both digests, unless the run accepts changes
// ([Runtime.AcceptChanges]; the recorded step then stands).
//
// Step outputs are sessions on the coordinator's graph ([client.Graph]):
// forks and merges a workflow makes in the driver are sealed locally and
// committed through the API. Finish a run with [Runtime.Complete] or
// [Runtime.Fail]; [Runtime.Run] does both around flow.Run.
package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/session"
)

// ErrStepCanceled reports a step that ended canceled: its run was
// canceled, timed out, or failed (a budget stop, for instance).
var ErrStepCanceled = errors.New("rath: step canceled")

// Runtime is a flow.Runtime whose steps run on the cluster, as steps of one
// workflow run. It is safe for concurrent use (fan-out branches call it at
// once).
type Runtime struct {
	c     *client.Client
	run   api.Run
	graph *client.Graph
	// Wait is how long one long-poll for a step's end lasts; default 30s.
	Wait time.Duration
}

var _ flow.Runtime = (*Runtime)(nil)

// Start opens a new workflow run driven by the caller (req.Workflow must be
// empty) and returns its runtime and input session.
func Start(ctx context.Context, c *client.Client, req client.WorkflowRequest) (*Runtime, session.Session, error) {
	if req.Workflow != "" {
		return nil, session.Session{}, errors.New("cluster: start: Workflow must be empty (the coordinator drives workflow files)")
	}
	r, err := c.StartWorkflow(ctx, req)
	if err != nil {
		return nil, session.Session{}, fmt.Errorf("cluster: start run: %w", err)
	}
	rt := &Runtime{c: c, run: r, graph: c.Graph()}
	in, err := rt.Input(ctx)
	if err != nil {
		return nil, session.Session{}, err
	}
	return rt, in, nil
}

// Open returns the runtime of an existing workflow run: a restarted
// driver re-executes its workflow on it and finds its committed steps.
func Open(ctx context.Context, c *client.Client, runID string) (*Runtime, error) {
	r, err := c.GetRun(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("cluster: open run %s: %w", runID, err)
	}
	if r.Kind != "workflow" {
		return nil, fmt.Errorf("cluster: run %s is an %s run, not a workflow run", runID, r.Kind)
	}
	return &Runtime{c: c, run: r, graph: c.Graph()}, nil
}

// RunID returns the run's id.
func (rt *Runtime) RunID() string { return rt.run.ID }

// Graph returns the graph step outputs live on.
func (rt *Runtime) Graph() session.Graph { return rt.graph }

// Input returns the run's input session.
func (rt *Runtime) Input(ctx context.Context) (session.Session, error) {
	return session.Open(ctx, rt.graph, rt.run.Input)
}

// Step implements flow.Runtime: it records the step (idempotently), waits
// until a worker has committed it, and returns its output. A failed step
// returns its recorded error; a canceled one [ErrStepCanceled].
func (rt *Runtime) Step(ctx context.Context, key string, call flow.Call, in session.Session) (session.Session, error) {
	raw, err := json.Marshal(call)
	if err != nil {
		return session.Session{}, fmt.Errorf("cluster: step %s: %w", key, err)
	}
	if in.IsZero() {
		return session.Session{}, fmt.Errorf("cluster: step %s: input session is zero", key)
	}
	wait := rt.Wait
	if wait <= 0 {
		wait = 30 * time.Second
	}
	// One request records the step and waits for its end; a step that
	// outlasts the wait is waited for with GET …?wait= after.
	st, err := rt.c.PutStepWait(ctx, rt.run.ID, key, raw, in.ID(), wait)
	if errors.Is(err, client.ErrNondeterministic) {
		// The coordinator's message names the key and both digests.
		return session.Session{}, fmt.Errorf("cluster: %w", nondeterministic{err})
	}
	if err != nil {
		return session.Session{}, fmt.Errorf("cluster: step %s: %w", key, err)
	}
	for !st.Terminal() {
		if st, err = rt.c.GetStep(ctx, rt.run.ID, key, wait); err != nil {
			return session.Session{}, fmt.Errorf("cluster: step %s: %w", key, err)
		}
		if !st.Terminal() {
			// The run may have ended without this step (canceled while
			// pending is covered: the step is canceled with it).
			if err := ctx.Err(); err != nil {
				return session.Session{}, err
			}
		}
	}
	switch st.Status {
	case api.StepCommitted:
		if st.Output == nil {
			return session.Session{}, fmt.Errorf("cluster: step %s committed without an output", key)
		}
		return session.Open(ctx, rt.graph, *st.Output)
	case api.StepFailed:
		return session.Session{}, fmt.Errorf("cluster: step %s failed: %s", key, st.Error)
	default:
		return session.Session{}, fmt.Errorf("cluster: step %s is %s: %w", key, st.Status, ErrStepCanceled)
	}
}

// nondeterministic is the coordinator's refusal of a changed step: it
// matches flow.ErrNondeterministic (and, unwrapped, the client's error).
type nondeterministic struct{ err error }

func (e nondeterministic) Error() string        { return e.err.Error() }
func (e nondeterministic) Unwrap() error        { return e.err }
func (e nondeterministic) Is(target error) bool { return target == flow.ErrNondeterministic }

// AcceptChanges records that the run accepts steps whose input or call
// changed since they were recorded ([client.Client.AcceptChanges]): call
// it before re-executing a changed workflow on the run with [Open], and
// such steps return their recorded outputs. A run that failed because a
// step changed is reopened.
func (rt *Runtime) AcceptChanges(ctx context.Context) error {
	reply, err := rt.c.AcceptChanges(ctx, rt.run.ID)
	if err != nil {
		return fmt.Errorf("cluster: accept changes of run %s: %w", rt.run.ID, err)
	}
	rt.run = reply.Run
	return nil
}

// Complete ends the run succeeded with out.
func (rt *Runtime) Complete(ctx context.Context, out session.Session) error {
	if _, err := rt.c.CompleteRun(ctx, rt.run.ID, out.ID()); err != nil {
		return fmt.Errorf("cluster: complete run %s: %w", rt.run.ID, err)
	}
	return nil
}

// Fail ends the run failed with cause's message.
func (rt *Runtime) Fail(ctx context.Context, cause error) error {
	if _, err := rt.c.FailRun(ctx, rt.run.ID, cause.Error()); err != nil {
		return fmt.Errorf("cluster: fail run %s: %w", rt.run.ID, err)
	}
	return nil
}

// Run forwards in through wf as this run (flow.Run) and ends the run with
// the outcome: Complete with the output, or Fail with the error — unless the
// run already ended (canceled, timed out), whose status stands. The error
// is wf's.
func (rt *Runtime) Run(ctx context.Context, wf flow.Workflow, in session.Session) (session.Session, error) {
	out, err := flow.Run(ctx, rt, wf, in)
	if ctx.Err() != nil {
		return out, errors.Join(err, ctx.Err())
	}
	if cur, gerr := rt.c.GetRun(ctx, rt.run.ID); gerr == nil && cur.Terminal() {
		if err == nil && cur.Status != "succeeded" {
			err = fmt.Errorf("cluster: run %s is %s", rt.run.ID, cur.Status)
		}
		return out, err
	}
	if err != nil {
		if ferr := rt.Fail(ctx, err); ferr != nil {
			return out, errors.Join(err, ferr)
		}
		return out, err
	}
	return out, rt.Complete(ctx, out)
}
