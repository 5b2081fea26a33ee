// Package selector routes a workflow by asking a model: OpenRath's
// Selector. Candidates are self-describing workflows ([flow.Describer]);
// the selector shows the model the conversation and a numbered menu of
// their descriptions, and the model answers with an index, or -1 for none.
//
// [Selector.Select] returns the chosen workflow itself (by identity), or
// [flow.EmptyWorkflow] when the model chose none, together with the session
// that records the decision: one selector_decision chunk holding the
// candidates, the raw reply and the index chosen, so routing is evidence in
// the Session Graph. Control flow stays Go:
//
//	for round := 0; round < 10; round++ {
//		w, s, err = sel.Select(ctx, s, research, write)
//		if err != nil || flow.IsEmpty(w) {
//			break
//		}
//		if s, err = w.Forward(ctx, s); err != nil {
//			break
//		}
//	}
//
// The decision is one step of [flow.KindSelect] run by the context's
// runtime ([flow.Do]), so it executes in-process or on a worker and, in a
// durable run, is not asked twice.
package selector

import (
	"context"
	"errors"
	"fmt"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/session"
)

// ErrNotDescriber means a candidate does not describe itself.
var ErrNotDescriber = errors.New("rath: selector candidate is not a flow.Describer")

// DefaultInstruction is the router rubric a selector uses when its spec
// has no instructions.
const DefaultInstruction = flow.DefaultSelectInstruction

// Selector chooses among workflows with one model call.
type Selector struct {
	// Spec gives the model; its instructions are the rubric
	// ([DefaultInstruction] when empty). Tools are never offered.
	Spec agent.Spec
	// Desc describes the selector itself, so a selector can be a
	// candidate of another (through a workflow wrapping it).
	Desc string
}

// New returns a selector over spec's model with the default rubric unless
// the spec has instructions.
func New(spec agent.Spec) *Selector { return &Selector{Spec: spec} }

// Description returns the selector's description.
func (s *Selector) Description() string { return s.Desc }

// Select asks the model to choose among candidates for in and returns the
// chosen candidate (the same value that was passed in) or
// [flow.EmptyWorkflow], and the session with the decision recorded. With
// no candidates it returns EmptyWorkflow and in unchanged, without a model
// call. Every candidate must be a [flow.Describer] with a non-blank
// description ([ErrNotDescriber] otherwise).
func (s *Selector) Select(ctx context.Context, in session.Session, candidates ...flow.Workflow) (flow.Workflow, session.Session, error) {
	if len(candidates) == 0 {
		return flow.EmptyWorkflow, in, nil
	}
	if len(candidates) > flow.MaxCandidates {
		return nil, in, fmt.Errorf("selector %s: %d candidates, limit %d", s.Spec.Name, len(candidates), flow.MaxCandidates)
	}
	descs := make([]string, len(candidates))
	for i, c := range candidates {
		d, ok := c.(flow.Describer)
		if !ok {
			return nil, in, fmt.Errorf("selector %s: candidate %d (%T): %w", s.Spec.Name, i, c, ErrNotDescriber)
		}
		if descs[i] = d.Description(); descs[i] == "" {
			return nil, in, fmt.Errorf("selector %s: candidate %d (%T) has an empty description", s.Spec.Name, i, c)
		}
	}
	out, err := flow.Do(ctx, flow.Call{Kind: flow.KindSelect, Agent: s.Spec, Candidates: descs}, in)
	if err != nil {
		return nil, in, err
	}
	d, err := flow.DecisionOf(out)
	if err != nil {
		return nil, in, err
	}
	if d.Choice < 0 || d.Choice >= len(candidates) {
		return flow.EmptyWorkflow, out, nil
	}
	return candidates[d.Choice], out, nil
}
