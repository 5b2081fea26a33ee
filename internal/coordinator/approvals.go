package coordinator

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

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
	res, err := c.runSvc.Decide(r.Context(), c.scopeOf(r.Context()), r.PathValue("id"), req)
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

// resumedSince reports whether e is a run.waiting or run.needs_review
// event of a run that no longer waits (it was decided since): a stream of
// its events goes on past it instead of ending there.
func (c *Coordinator) resumedSince(ctx context.Context, e bus.Event) bool {
	if e.Type != "run.waiting" && e.Type != api.EventRunNeedsReview {
		return false
	}
	r, err := c.runsOf(ctx).Get(ctx, e.RunID)
	return err == nil && r.Status != runs.RunWaiting
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
