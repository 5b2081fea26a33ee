// Package flow is Rath's programming model: workflows compose agents the way
// nn.Modules compose layers. A [Workflow] is anything with
//
//	Forward(ctx context.Context, s session.Session) (session.Session, error)
//
// written in plain Go: if and for are the control flow, and a selector (package
// selector) routes when the route depends on the conversation.
//
// # Building blocks
//
// [Agent] is one agent step; [Sequence] ([Seq]) runs workflows in order;
// [Parallel] ([Par], [Fanout]) forks the input into branches that run
// concurrently and merges their outputs in branch order; [Compressor]
// replaces a long transcript with one summary; [Empty] ([EmptyWorkflow]) is
// the identity a selector returns for "none" (package selector). All of
// them are Workflows, so they nest.
//
// # Runtimes and steps
//
// Every agent, selector or compressor call inside a workflow is a step: a
// [Call] executed by the [Runtime] the context carries ([WithRuntime], [Run],
// [Do]). The in-process runtime ([Local]) executes steps in the calling
// process with [Execute]; the cluster runtime (package flow/cluster) turns
// each step into a job that any worker runs, with the same agent loop and
// the same [Execute] for selector and compressor calls. Workflow code does not change between them, as a model's code
// does not change between devices.
//
// # Durable runs
//
// A step's key is derived deterministically from its position in the run
// ([NextKey]): the n-th step of the root scope is "n", and the n-th step of
// branch i of the fan-out that took key k is "k.b<i>.n" ([Branch],
// [Branches]). A runtime commits a step with the id "<run>/<key>"
// ([StepID]); asked for a step id that already committed, it returns the
// committed output without executing again, so a driver that dies and
// re-executes the run's code continues where it was. Workflow code must
// therefore be deterministic given step results (as in Temporal): the
// order of steps in a scope may depend only on the run's input and earlier
// steps' outputs, keys are taken only in the goroutine that owns the
// scope, and every goroutine a fan-out starts gets its own [Branch].
// Fan-in merges are keyed by the versions they merge, so a re-executed
// fan-out returns the same merged version too.
package flow

import (
	"context"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/session"
)

// Workflow forwards a session: an agent, a composition of agents, or any
// code with this signature.
type Workflow interface {
	Forward(ctx context.Context, s session.Session) (session.Session, error)
}

// Describer is a self-describing workflow: a selector offers its
// Description to the model as a candidate.
type Describer interface {
	Description() string
}

// Func adapts a function to a Workflow.
type Func func(ctx context.Context, s session.Session) (session.Session, error)

// Forward calls f.
func (f Func) Forward(ctx context.Context, s session.Session) (session.Session, error) {
	return f(ctx, s)
}

// Kind names what a step call does.
type Kind string

// Step call kinds.
const (
	// KindAgent runs the agent loop of Call.Agent (op step).
	KindAgent Kind = "agent"
	// KindSelect asks Call.Agent's model to choose among Call.Candidates
	// and records the decision as a selector_decision chunk.
	KindSelect Kind = "select"
	// KindCompress replaces the transcript with one summary chunk (op
	// compress), one model call with tools off.
	KindCompress Kind = "compress"
	// KindVerify runs Call.Verifier's command in the sandbox of the input
	// session's workspace and records its score as a label chunk (a
	// version whose one chunk is what `rathctl label --score` writes).
	KindVerify Kind = "verify"
)

// Call is one step: what to forward the step's input through. It is the
// Target of a step job on the cluster (see [ParseTarget]).
type Call struct {
	Kind Kind `json:"kind"`
	// Agent is the agent for KindAgent, and the model and system prompt of
	// a selector or compressor.
	Agent agent.Spec `json:"agent"`
	// Candidates are the descriptions a selector chooses among, in order.
	Candidates []string `json:"candidates,omitempty"`
	// Instruction is a compressor's final user instruction; empty means the
	// default.
	Instruction string `json:"instruction,omitempty"`
	// Verifier is the command of a [KindVerify] call; the agent is then the
	// branch's agent, which names the step and no model is called.
	Verifier *Verifier `json:"verifier,omitempty"`
	// Branches, on a select call of a [Rollout], are the branch outputs
	// the candidates describe, in order: the decision records them, so
	// the choice ranks those versions (pairs from selector decisions).
	Branches []session.ID `json:"branches,omitempty"`
}

// Runtime executes steps.
type Runtime interface {
	// Step forwards in through call as the step named key (unique within
	// the run and deterministic, see [NextKey]) and returns the committed
	// output. A key that already committed returns its output without
	// executing again; a key whose input changed since it was recorded is
	// refused ([ErrNondeterministic]: the cluster runtimes compare the
	// whole [StepDigest], [Local] the input and the agent's name).
	Step(ctx context.Context, key string, call Call, in session.Session) (session.Session, error)
}
