package agent

import (
	"context"
	"errors"

	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/memory"
	"github.com/rath-run/rath/pkg/sandbox"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/tool"
)

// ErrToolsUnavailable is kept for callers that matched on it. The loop no
// longer returns it: a call to a tool the agent does not offer is answered
// with an unknown_tool error body and the model carries on.
var ErrToolsUnavailable = errors.New("rath: model requested tools but none are available")

// Agent forwards sessions through a model and the tools it offers. It is
// safe for concurrent use if its Provider and tools are.
type Agent struct {
	Spec     Spec
	Provider llm.Provider
	// Model is the resolved provider model name; Spec.Model when empty.
	Model string
	// Tools are the tools the model may call (see tool.Registry.Select);
	// nil offers none.
	Tools *tool.Set
	// Memory is the store Spec.Memory names, resolved by the caller; nil
	// disables recall and commit even when the spec binds a store.
	Memory memory.Store
	// Approver, when set, decides tool calls that need approval during the
	// step. Without one the step commits what it has and returns an
	// [*ApprovalError] (the worker marks the step waiting).
	Approver Approver
}

// Budget is a run's budget as a step sees it: the limits and what the run's
// earlier steps used. Zero limits are unlimited.
type Budget struct {
	MaxTokens  int64 `json:"max_tokens,omitempty"`
	UsedTokens int64 `json:"used_tokens,omitempty"`
	// MaxCostUSD is priced with the agent spec's pricing.
	MaxCostUSD  float64 `json:"max_cost_usd,omitempty"`
	UsedCostUSD float64 `json:"used_cost_usd,omitempty"`
}

// Meta describes the step an agent call belongs to. It is recorded on the
// version the step commits.
type Meta struct {
	// Key makes the commit idempotent: a redelivered step finds its version.
	Key      string
	Producer session.Producer
	// OnDelta, when set and the provider streams, receives text deltas.
	OnDelta func(string)
	// OnEvent, when set, receives tool calls and their results as they
	// happen, from the loop's goroutines (it must be safe for concurrent
	// use).
	OnEvent func(Event)
	// Sandbox is where the tools run; nil when the step has none.
	Sandbox sandbox.Sandbox
	// Network says the sandbox can reach a network (its placement asks
	// for egress, or its backend runs commands on the host): tools that
	// declare tool.Def.Network are then not idempotent.
	Network bool
	// Run is what is left of the run's budget.
	Run Budget
	// Placement, when set, is called once after the loop and before the
	// commit; the version records the placement it returns (a workspace
	// snapshot, say). An error fails the step without a commit.
	Placement func(ctx context.Context) (session.Placement, error)
	// Journal, when set, records the step's progress durably and replays
	// what an earlier delivery recorded (see [Journal]).
	Journal Journal
	// Checkpoint, when set with Journal, snapshots the workspace at the
	// end of each round; the id is recorded with the round's end, and a
	// resumed step's workspace starts from the last one. A round whose
	// tools were all read-only (tool.Def.ReadOnly) or MCP tools records
	// the delivery's previous checkpoint without calling it again.
	Checkpoint func(ctx context.Context) (string, error)

	rp *replay // the loaded journal, set by Run
}

// Event is a tool call starting or ending, for live progress.
type Event struct {
	// Type is "tool.call" or "tool.result".
	Type   string `json:"type"`
	Round  int    `json:"round"`
	CallID string `json:"call_id"`
	Name   string `json:"name"`
	// Arguments are the call's raw arguments (tool.call), cut at 4 KiB.
	Arguments string `json:"arguments,omitempty"`
	// OK and ErrorKind describe the result (tool.result).
	OK        bool   `json:"ok"`
	ErrorKind string `json:"error_kind,omitempty"`
	// Memos and Warning describe a memory.commit with extraction: the
	// memos written, and why extraction wrote none (the archive is
	// written regardless).
	Memos   int    `json:"memos,omitempty"`
	Warning string `json:"warning,omitempty"`
}

// Forward runs one step of the agent on s and returns the new session.
func (a *Agent) Forward(ctx context.Context, s session.Session) (session.Session, error) {
	return a.Step(ctx, s, Meta{})
}

// Step runs one step of the agent loop on s and commits its result as one
// version (op step); see the package documentation for the loop's contract.
func (a *Agent) Step(ctx context.Context, s session.Session, m Meta) (session.Session, error) {
	res, err := a.Run(ctx, s, m)
	if err != nil {
		return session.Session{}, err
	}
	if res.Stop == StopApproval && len(res.Chunks) == 0 {
		// Still waiting on calls s already holds: nothing new to commit.
		return session.Session{}, &ApprovalError{Pending: res.Pending, Session: s}
	}
	ext := res.Extension(m)
	if m.Placement != nil {
		p, err := m.Placement(ctx)
		if err != nil {
			return session.Session{}, err
		}
		ext.Placement = &p
	}
	out, err := s.Extend(ctx, ext)
	if err != nil {
		return session.Session{}, err
	}
	if res.Stop == StopApproval {
		// The step is not finished: memory is committed when it is.
		return session.Session{}, &ApprovalError{Pending: res.Pending, Session: out}
	}
	// The step is committed: a failed memory commit is reported, not a
	// failed step (OpenRath swallows it too).
	if res, err := a.commitMemory(ctx, out); err != nil && m.OnEvent != nil {
		m.OnEvent(Event{Type: "memory.commit", ErrorKind: memoryErrorKind(err)})
	} else if err == nil && a.Memory != nil && a.Spec.Memory.Commit && m.OnEvent != nil {
		m.OnEvent(Event{Type: "memory.commit", OK: true, Memos: len(res.Memos), Warning: res.Warning})
	}
	return out, nil
}

func memoryErrorKind(err error) string {
	var me *memory.Error
	if errors.As(err, &me) {
		return string(me.Kind)
	}
	return "internal"
}
