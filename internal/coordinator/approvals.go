package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/rath-run/rath/internal/auth"
	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/session"
)

// Approvals: POST /v1/runs/{id}/approvals decides the tool calls a waiting
// step paused before (see package agent, "Approvals"). Each decision is an
// approval chunk appended after the assistant's calls, in a version keyed
// "<step>/approval/<n>" on the waiting version (so the graph, not a side
// table, is the record, and a retried request does not append twice).
// Once every pending call is decided, the waiting step ends and its
// continuation step (runs.ContinuationID) is published: a worker forwards
// the decided version through the same agent, which runs the approved
// calls, answers the rejected ones, and goes on.

// maxDecideRetries bounds the retries of a decision that raced another.
const maxDecideRetries = 8

func (c *Coordinator) approvalRoutes(api *apiMux) {
	api.HandleFunc("POST /v1/runs/{id}/approvals", c.decideHTTP)
}

func (c *Coordinator) decideHTTP(w http.ResponseWriter, r *http.Request) {
	var req api.ApprovalRequest
	if !c.decode(w, r, &req) {
		return
	}
	res, err := c.Decide(r.Context(), r.PathValue("id"), req)
	if errors.Is(err, runs.ErrNotWaiting) {
		writeError(w, http.StatusConflict, "conflict", err.Error())
		return
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// normalize checks the request, naming the bad field, and returns the
// decision as recorded.
func normalizeDecision(req api.ApprovalRequest) (string, error) {
	var d string
	switch req.Decision {
	case "approve", agent.DecisionApproved:
		d = agent.DecisionApproved
	case "reject", agent.DecisionRejected:
		d = agent.DecisionRejected
	case "":
		return "", badRequest("decision: required (\"approve\" or \"reject\")")
	default:
		return "", badRequest("decision: %q: want \"approve\" or \"reject\"", req.Decision)
	}
	switch {
	case d == agent.DecisionRejected && req.Reason == "":
		return "", badRequest("reason: required to reject (the model is told why)")
	case len(req.Reason) > 4096:
		return "", badRequest("reason: %d bytes, limit 4096", len(req.Reason))
	case len(req.CallID) > 256:
		return "", badRequest("call_id: %d bytes, limit 256", len(req.CallID))
	}
	return d, nil
}

// Decide records a decision on a waiting run's pending tool calls (one, or
// every call still pending) and, once none is left, resumes the run. It is
// idempotent per call id: repeating a decision changes nothing; the
// opposite decision on a decided call is a conflict. A run with nothing
// waiting returns an error wrapping runs.ErrNotWaiting.
func (c *Coordinator) Decide(ctx context.Context, runID string, req api.ApprovalRequest) (api.ApprovalResponse, error) {
	decision, err := normalizeDecision(req)
	if err != nil {
		return api.ApprovalResponse{}, err
	}
	for range maxDecideRetries {
		res, raced, err := c.decideOnce(ctx, runID, req, decision)
		if !raced {
			return res, err
		}
	}
	return api.ApprovalResponse{}, fmt.Errorf("%w: run %s: decisions keep racing; retry", session.ErrConflict, runID)
}

// decideOnce makes one attempt; raced reports that another decision was
// appended meanwhile (the caller retries on the new head).
func (c *Coordinator) decideOnce(ctx context.Context, runID string, req api.ApprovalRequest, decision string) (api.ApprovalResponse, bool, error) {
	rs := c.runsOf(ctx)
	waiting, err := rs.WaitingSteps(ctx, runID)
	if err != nil {
		return api.ApprovalResponse{}, false, err
	}
	if len(waiting) == 0 {
		r, err := rs.Get(ctx, runID)
		if err != nil {
			return api.ApprovalResponse{}, false, err
		}
		return api.ApprovalResponse{}, false, fmt.Errorf("run %s is %s: %w", runID, r.Status, runs.ErrNotWaiting)
	}
	st := waiting[0]
	if req.CallID != "" {
		// The step that waits on this call, when several do.
		for _, w := range waiting {
			if p, err := c.pendingOf(ctx, w); err == nil && hasCall(p, req.CallID) {
				st = w
			}
		}
	}
	pending, err := c.pendingOf(ctx, st)
	if err != nil {
		return api.ApprovalResponse{}, false, err
	}
	head, n, err := c.approvalHead(ctx, st)
	if err != nil {
		return api.ApprovalResponse{}, false, err
	}
	chunks, err := head.Chunks(ctx)
	if err != nil {
		return api.ApprovalResponse{}, false, err
	}
	_, decided := agent.Pending(chunks)
	if decided == nil {
		decided = map[string]agent.Decision{}
	}

	var targets []agent.PendingCall
	if req.CallID != "" {
		if !hasCall(pending, req.CallID) {
			return api.ApprovalResponse{}, false, badRequest("call_id: %q is not waiting for a decision; waiting: %s", req.CallID, callIDs(pending))
		}
		if d, ok := decided[req.CallID]; ok && d.Decision != decision {
			return api.ApprovalResponse{}, false, fmt.Errorf("%w: call %s is already %s", session.ErrConflict, req.CallID, d.Decision)
		}
		for _, p := range pending {
			if _, ok := decided[p.CallID]; p.CallID == req.CallID && !ok {
				targets = append(targets, p)
			}
		}
	} else {
		for _, p := range pending {
			if _, ok := decided[p.CallID]; !ok {
				targets = append(targets, p)
			}
		}
	}

	by := "api"
	if p, ok := auth.PrincipalFrom(ctx); ok {
		switch {
		case p.Name != "":
			by = p.Name
		case p.TokenID != "":
			by = "token:" + p.TokenID
		}
	}
	var made []api.Decision
	if len(targets) > 0 {
		var cs []session.Chunk
		for _, p := range targets {
			d := agent.Decision{CallID: p.CallID, Tool: p.Tool, Decision: decision, Reason: req.Reason, By: by}
			ch, err := agent.ApprovalChunk(d)
			if err != nil {
				return api.ApprovalResponse{}, false, fmt.Errorf("%w: %w", ErrBadRequest, err)
			}
			cs, made = append(cs, ch), append(made, api.Decision(d))
		}
		next, err := head.Extend(ctx, session.Extension{
			Op: session.OpAppend, Chunks: cs, Key: approvalKey(st.ID, n+1),
			Producer: session.Producer{Run: runID, Step: st.ID},
		})
		if err != nil {
			return api.ApprovalResponse{}, false, fmt.Errorf("record decision: %w", err)
		}
		if !sameChunks(next.Version().Chunks, cs) {
			return api.ApprovalResponse{}, true, nil // another decision took this slot
		}
		head = next
		for _, d := range made {
			decided[d.CallID] = agent.Decision(d)
		}
		for _, d := range made {
			c.event(ctx, bus.Event{RunID: runID, StepID: st.ID, Type: api.EventApprovalDecided, Data: mustJSON(api.ApprovalDecided{
				CallID: d.CallID, Tool: d.Tool, Decision: d.Decision, Reason: d.Reason, By: d.By, Version: head.ID()})})
		}
	}

	res := api.ApprovalResponse{Decided: nonNil(made), Pending: []api.PendingCall{}}
	for _, p := range pending {
		if _, ok := decided[p.CallID]; !ok {
			res.Pending = append(res.Pending, api.PendingCall(p))
		}
	}
	if len(res.Pending) == 0 {
		cont, created, err := rs.Continue(ctx, st.ID, head.ID())
		if err != nil {
			return api.ApprovalResponse{}, false, err
		}
		wire := cont.API()
		res.Continuation = &wire
		if created {
			if err := c.publishContinuation(ctx, cont); err != nil {
				c.log.WarnContext(ctx, "publish failed; the reconciler will retry", slog.String("step_id", cont.ID), slog.Any("error", err))
			}
		}
	}
	run, err := rs.Get(ctx, runID)
	if err != nil {
		return api.ApprovalResponse{}, false, err
	}
	res.Run = run.API()
	if res.Continuation != nil && len(made) > 0 {
		// Not a run.* event: those end a watcher's stream.
		c.event(ctx, bus.Event{RunID: runID, StepID: st.ID, Type: api.EventStepContinued,
			Data: mustJSON(api.StepContinued{Continuation: res.Continuation.ID, Input: head.ID()})})
	}
	return res, false, nil
}

// getStepOutcome is [stepOutcome] of the step id.
func getStepOutcome(ctx context.Context, rs *runs.Store, id string) (runs.Step, error) {
	st, err := rs.GetStep(ctx, id)
	if err != nil {
		return st, err
	}
	return stepOutcome(ctx, rs, st)
}

// stepOutcome returns st as a workflow driver must see it: a step that
// waited for approval ended committed with its waiting version, and its
// continuation carries on, so its status, output and error are those of
// its last continuation (runs.Store.Final). A step that never waited is
// returned as is.
func stepOutcome(ctx context.Context, rs *runs.Store, st runs.Step) (runs.Step, error) {
	if st.Status != runs.StepCommitted {
		return st, nil
	}
	f, err := rs.Final(ctx, st.ID)
	if err != nil || f.ID == st.ID {
		return st, err
	}
	st.Status, st.Output, st.Error, st.FinishedAt = f.Status, f.Output, f.Error, f.FinishedAt
	return st, nil
}

// resumedSince reports whether e is a run.waiting event of a run that no
// longer waits (it was decided since): a stream of its events goes on past
// it instead of ending there.
func (c *Coordinator) resumedSince(ctx context.Context, e bus.Event) bool {
	if e.Type != "run.waiting" {
		return false
	}
	r, err := c.runsOf(ctx).Get(ctx, e.RunID)
	return err == nil && r.Status != runs.RunWaiting
}

func (c *Coordinator) publishContinuation(ctx context.Context, st runs.Step) error {
	r, err := c.runsOf(ctx).Get(ctx, st.RunID)
	if err != nil {
		return err
	}
	return c.publishStep(ctx, r, st, st.ID)
}

// pendingOf reads the calls a waiting step waits on from its waiting
// version's approval.pending extra.
func (c *Coordinator) pendingOf(ctx context.Context, st runs.Step) ([]agent.PendingCall, error) {
	if st.Output == nil {
		return nil, fmt.Errorf("step %s waits without a waiting version", st.ID)
	}
	v, err := c.graph.Get(ctx, *st.Output)
	if err != nil {
		return nil, fmt.Errorf("step %s: waiting version: %w", st.ID, err)
	}
	for _, e := range v.Extras {
		if e.Key == agent.ExtraPending {
			var p []agent.PendingCall
			if err := json.Unmarshal(e.Value, &p); err != nil {
				return nil, fmt.Errorf("step %s: %s: %w", st.ID, agent.ExtraPending, err)
			}
			return p, nil
		}
	}
	return nil, fmt.Errorf("step %s: waiting version %s has no %s", st.ID, v.ID, agent.ExtraPending)
}

// approvalHead returns the newest version of a waiting step's decisions
// (its waiting version when none is recorded) and how many were appended.
func (c *Coordinator) approvalHead(ctx context.Context, st runs.Step) (session.Session, int, error) {
	head, err := session.Open(ctx, c.graph, *st.Output)
	if err != nil {
		return session.Session{}, 0, err
	}
	n := 0
	for {
		v, err := c.graph.GetByKey(ctx, approvalKey(st.ID, n+1))
		if errors.Is(err, session.ErrNotFound) {
			return head, n, nil
		}
		if err != nil {
			return session.Session{}, 0, err
		}
		if head, err = session.Open(ctx, c.graph, v.ID); err != nil {
			return session.Session{}, 0, err
		}
		n++
	}
}

func approvalKey(stepID string, n int) string { return stepID + "/approval/" + strconv.Itoa(n) }

func hasCall(ps []agent.PendingCall, id string) bool {
	for _, p := range ps {
		if p.CallID == id {
			return true
		}
	}
	return false
}

func callIDs(ps []agent.PendingCall) string {
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.CallID
	}
	b, _ := json.Marshal(ids)
	return string(b)
}

func sameChunks(a, b []session.Chunk) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Kind() != b[i].Kind() || string(a[i].Payload()) != string(b[i].Payload()) {
			return false
		}
	}
	return true
}
