package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/tool"
)

// StopApproval is the stop reason of a step that paused before tool calls
// that need a human's approval (see "Approvals" in the package docs).
const StopApproval = "approval"

// Approval decisions.
const (
	DecisionApproved = "approved"
	DecisionRejected = "rejected"
)

// ExtraPending is the extra of a waiting version: the calls it waits on, a
// JSON array of [PendingCall].
const ExtraPending = "approval.pending"

// Limits on an approval decision.
const (
	maxReasonBytes = 4096
	maxByBytes     = 256
	maxCallIDBytes = 256
)

// ErrNeedsApproval is matched (errors.Is) by the [*ApprovalError] a step
// returns when it paused for approval and no [Approver] decided.
var ErrNeedsApproval = errors.New("rath: tool calls need approval")

// PendingCall is a tool call waiting for a decision.
type PendingCall struct {
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Arguments are the model's raw arguments, cut at 4 KiB.
	Arguments string `json:"arguments"`
}

// Decision is a human's decision on one pending call, recorded as an
// approval chunk (session.KindApproval) after the assistant chunk that made
// the call.
type Decision struct {
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Decision is DecisionApproved or DecisionRejected.
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
	// By names who decided (a token subject, a user, "sdk").
	By string `json:"by,omitempty"`
}

// Approved reports whether the call may run.
func (d Decision) Approved() bool { return d.Decision == DecisionApproved }

// Validate checks the decision, naming the bad field.
func (d Decision) Validate() error {
	switch {
	case d.CallID == "" || len(d.CallID) > maxCallIDBytes:
		return fmt.Errorf("call_id: must be 1..%d bytes", maxCallIDBytes)
	case d.Tool == "":
		return errors.New("tool: required")
	case d.Decision != DecisionApproved && d.Decision != DecisionRejected:
		return fmt.Errorf("decision: must be %q or %q, got %q", DecisionApproved, DecisionRejected, d.Decision)
	case len(d.Reason) > maxReasonBytes:
		return fmt.Errorf("reason: %d bytes, limit %d", len(d.Reason), maxReasonBytes)
	case len(d.By) > maxByBytes:
		return fmt.Errorf("by: %d bytes, limit %d", len(d.By), maxByBytes)
	}
	return nil
}

// ApprovalChunk returns the approval chunk recording d.
func ApprovalChunk(d Decision) (session.Chunk, error) {
	if err := d.Validate(); err != nil {
		return session.Chunk{}, fmt.Errorf("%w: approval: %w", session.ErrInvalidChunk, err)
	}
	return session.Evidence(session.KindApproval, d)
}

// ParseApproval decodes an approval chunk strictly.
func ParseApproval(c session.Chunk) (Decision, error) {
	if c.Kind() != session.KindApproval {
		return Decision{}, fmt.Errorf("approval: chunk kind is %q", c.Kind())
	}
	return parseDecision(c.Payload())
}

func parseDecision(raw []byte) (Decision, error) {
	var d Decision
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return Decision{}, fmt.Errorf("approval: %w", err)
	}
	if dec.More() {
		return Decision{}, errors.New("approval: trailing data")
	}
	if err := d.Validate(); err != nil {
		return Decision{}, fmt.Errorf("approval: %w", err)
	}
	return d, nil
}

// Approver decides pending tool calls synchronously, for in-process use (a
// Go program, a test, a notebook). It returns one decision per call; a
// call it leaves out fails the step.
type Approver interface {
	Approve(ctx context.Context, calls []PendingCall) ([]Decision, error)
}

// ApproverFunc adapts a function to an [Approver].
type ApproverFunc func(ctx context.Context, calls []PendingCall) ([]Decision, error)

// Approve calls f.
func (f ApproverFunc) Approve(ctx context.Context, calls []PendingCall) ([]Decision, error) {
	return f(ctx, calls)
}

// ApprovalError is the error of a step that paused for approval: the
// version it committed (the assistant's tool calls, with the extra
// approval.pending) and the calls waiting. It matches [ErrNeedsApproval].
type ApprovalError struct {
	Pending []PendingCall
	// Session is the committed waiting version; forward it again once
	// approval chunks for every pending call are appended to it.
	Session session.Session
}

func (e *ApprovalError) Error() string {
	names := make([]string, len(e.Pending))
	for i, p := range e.Pending {
		names[i] = p.Tool + " (" + p.CallID + ")"
	}
	return fmt.Sprintf("%v: %s", ErrNeedsApproval, strings.Join(names, ", "))
}

// Is reports whether target is ErrNeedsApproval.
func (e *ApprovalError) Is(target error) bool { return target == ErrNeedsApproval }

// Pending returns the tool calls a transcript leaves unanswered at its end
// — calls of the last assistant chunk with no tool_result after it — and
// the decisions recorded after that chunk, by call id. Decisions recorded
// before the last assistant chunk never count: a model that reuses an old
// call id gets no approval from it.
func Pending(chunks []session.Chunk) (open []session.ToolCall, decided map[string]Decision) {
	last := -1
	for i := len(chunks) - 1; i >= 0; i-- {
		if chunks[i].Kind() == session.KindAssistant {
			last = i
			break
		}
	}
	if last < 0 {
		return nil, nil
	}
	answered := map[string]bool{}
	for _, c := range chunks[last+1:] {
		switch c.Kind() {
		case session.KindToolResult:
			if r, ok := c.ToolResult(); ok {
				answered[r.ToolCallID] = true
			}
		case session.KindApproval:
			d, err := ParseApproval(c)
			if err != nil {
				continue
			}
			if decided == nil {
				decided = map[string]Decision{}
			}
			if _, dup := decided[d.CallID]; !dup {
				decided[d.CallID] = d // the first decision on a call stands
			}
		}
	}
	for _, c := range chunks[last].ToolCalls() {
		if !answered[c.ID] {
			open = append(open, c)
		}
	}
	return open, decided
}

// idempotent reports whether a call to t may run again when a crash left
// its outcome unknown: the tool declares it (tool.Def.Idempotent), or it
// belongs to an MCP server that lists it under idempotent.
func (a *Agent) idempotent(t tool.Tool) bool {
	d := t.Def()
	if d.Idempotent {
		return true
	}
	for _, srv := range a.Spec.MCP {
		name, ok := strings.CutPrefix(d.Name, srv.Name+"__")
		if !ok {
			continue
		}
		for _, n := range srv.Idempotent {
			if n == name || n == "*" {
				return true
			}
		}
	}
	return false
}

// isMCP reports whether t belongs to one of the spec's MCP servers: it
// runs on the worker host and never touches the step's workspace.
func (a *Agent) isMCP(t tool.Tool) bool {
	name := t.Def().Name
	for _, srv := range a.Spec.MCP {
		if strings.HasPrefix(name, srv.Name+"__") {
			return true
		}
	}
	return false
}

// needsApproval reports whether a call to the named tool must wait for a
// decision: the tool declares it, the spec lists it (or "*"), or it belongs
// to an MCP server marked approve. A name the agent does not offer needs
// none: the call is answered with unknown_tool and never runs.
func (a *Agent) needsApproval(name string) bool {
	t, ok := a.Tools.Get(name)
	if !ok {
		return false
	}
	if t.Def().NeedsApproval {
		return true
	}
	for _, n := range a.Spec.Approve {
		if n == name || n == "*" {
			return true
		}
	}
	for _, srv := range a.Spec.MCP {
		if srv.Approve && strings.HasPrefix(name, srv.Name+"__") {
			return true
		}
	}
	return false
}

// settle answers one round's tool calls. decided holds decisions already
// in the transcript; calls that need approval and have none are asked of
// the Approver, or, without one, the whole round waits: settle returns
// false with res.Stop = StopApproval and res.Pending set, having run
// nothing. Otherwise approved calls and calls that need no approval run
// (see runTools), rejected ones are answered with a "rejected" error body,
// and one tool_result per call is added in the model's order.
func (a *Agent) settle(ctx context.Context, round int, calls []session.ToolCall, decided map[string]Decision,
	m Meta, res *Result, addResult func(session.ToolResult)) (bool, error) {
	var pending []PendingCall
	for _, c := range calls {
		if _, ok := decided[c.ID]; !ok && a.needsApproval(c.Function.Name) {
			pending = append(pending, PendingCall{CallID: c.ID, Tool: c.Function.Name, Arguments: cutString(c.Function.Arguments, maxEventArgs)})
		}
	}
	if len(pending) > 0 {
		if a.Approver == nil {
			res.Stop, res.Pending = StopApproval, pending
			for _, p := range pending {
				a.emit(m, Event{Type: "approval.pending", Round: round, CallID: p.CallID, Name: p.Tool, Arguments: p.Arguments})
			}
			return false, nil
		}
		ds, err := a.Approver.Approve(ctx, pending)
		if err != nil {
			return false, fmt.Errorf("agent %s: approver: %w", a.Spec.Name, err)
		}
		got := map[string]Decision{}
		for _, d := range ds {
			got[d.CallID] = d
		}
		if decided == nil {
			decided = map[string]Decision{}
		}
		for _, p := range pending {
			d, ok := got[p.CallID]
			if !ok {
				return false, fmt.Errorf("agent %s: approver: no decision for call %s (%s)", a.Spec.Name, p.CallID, p.Tool)
			}
			d.Tool = p.Tool
			c, err := ApprovalChunk(d)
			if err != nil {
				return false, fmt.Errorf("agent %s: approver: call %s: %w", a.Spec.Name, p.CallID, err)
			}
			res.Chunks = append(res.Chunks, c)
			decided[p.CallID] = d
			a.emit(m, Event{Type: "approval.decided", Round: round, CallID: p.CallID, Name: p.Tool, OK: d.Approved()})
		}
	}
	bodies := make([]string, len(calls))
	var run []session.ToolCall
	var at []int
	for i, c := range calls {
		if d, ok := decided[c.ID]; ok && !d.Approved() {
			msg := "a human rejected this call"
			if d.By != "" {
				msg = d.By + " rejected this call"
			}
			if d.Reason != "" {
				msg += ": " + d.Reason
			}
			bodies[i] = errorBody(&tool.Error{Kind: tool.KindRejected, Message: msg})
			a.emit(m, Event{Type: "tool.result", Round: round, CallID: c.ID, Name: c.Function.Name, ErrorKind: tool.KindRejected})
			continue
		}
		run, at = append(run, c), append(at, i)
	}
	if len(run) > 0 {
		rs, err := a.runTools(ctx, round, run, m, res.policyState(a))
		if err != nil {
			return false, err
		}
		res.Chunks = append(res.Chunks, m.rp.takeChunks()...)
		for j, r := range rs {
			bodies[at[j]] = r.Content
		}
	}
	for i, c := range calls {
		addResult(session.ToolResult{ToolCallID: c.ID, Name: c.Function.Name, Content: bodies[i]})
	}
	return true, nil
}
