package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/api"
)

// Reviews: POST /v1/runs/{id}/review decides an ambiguous tool call a
// step stopped on (see package runs, "Reviews"). The decision is recorded
// in the step's journal and the step is published again; the resumed step
// reads it (retry, skip with a result, or fail with a reason) and keeps it
// in its transcript as a review chunk. GET /v1/runs/{id} shows such a run,
// and its step, as needs_review with the calls in Run.Reviews.

func (c *Coordinator) reviewRoutes(api *apiMux) {
	api.HandleFunc("POST /v1/runs/{id}/review", c.reviewHTTP)
}

func (c *Coordinator) reviewHTTP(w http.ResponseWriter, r *http.Request) {
	var req api.ReviewRequest
	if !c.decode(w, r, &req) {
		return
	}
	res, err := c.runSvc.Review(r.Context(), c.scopeOf(r.Context()), r.PathValue("id"), req)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// Review records a decision on an ambiguous call of the run (req.CallID,
// or the only one) and publishes its step again.
func (svc *RunService) Review(ctx context.Context, sc Scope, runID string, req api.ReviewRequest) (api.ReviewResponse, error) {
	c := svc.c
	rs := sc.Runs
	ps, err := rs.PendingReviews(ctx, runID)
	if err != nil {
		return api.ReviewResponse{}, err
	}
	calls := ambiguousCalls(ps)
	var at = -1
	for i, p := range calls {
		if req.CallID == "" && len(calls) == 1 || p.CallID == req.CallID {
			at = i
		}
	}
	switch {
	case len(calls) == 0:
		r, err := rs.Get(ctx, runID)
		if err != nil {
			return api.ReviewResponse{}, err
		}
		return api.ReviewResponse{}, fmt.Errorf("run %s is %s: %w", runID, r.Status, runs.ErrNoReview)
	case at < 0 && req.CallID == "":
		return api.ReviewResponse{}, badRequest("call_id: the run waits on %d calls; name one of %s", len(calls), reviewIDs(calls))
	case at < 0:
		return api.ReviewResponse{}, badRequest("call_id: %q is not waiting for a review; waiting: %s", req.CallID, reviewIDs(calls))
	}
	call := calls[at]
	by := "api"
	switch p := sc.Principal; {
	case p.Name != "":
		by = p.Name
	case p.TokenID != "":
		by = "token:" + p.TokenID
	}
	rv := agent.Review{CallID: call.CallID, Tool: call.Tool, Round: call.Round, Decision: req.Decision,
		Result: req.Result, Reason: req.Reason, By: by}
	if err := rv.Validate(); err != nil {
		return api.ReviewResponse{}, badRequest("%v", err)
	}
	data, err := json.Marshal(rv)
	if err != nil {
		return api.ReviewResponse{}, fmt.Errorf("review: encode: %w", err)
	}
	st, err := rs.Review(ctx, call.StepID, call.Round, call.CallID, by, data)
	if err != nil {
		return api.ReviewResponse{}, err
	}
	c.event(ctx, bus.Event{RunID: runID, StepID: st.ID, Type: api.EventReviewDecided, Data: mustJSON(rv)})
	if st.Status == runs.StepPending {
		// The step is pending again: its run is read and its job goes
		// out whether or not the caller is still there.
		ctx, cancel := detached(ctx)
		defer cancel()
		r, err := rs.Get(ctx, runID)
		if err != nil {
			return api.ReviewResponse{}, err
		}
		if err := c.publishStep(ctx, sc.Graph, r, st, runs.ReviewMsgID(st.ID, call.Round, call.CallID)); err != nil {
			c.log.WarnContext(ctx, "publish failed; the reconciler will retry", slog.String("step_id", st.ID), slog.Any("error", err))
		}
	}
	return api.ReviewResponse{Call: call, Decision: rv.Decision, Step: st.API()}, nil
}

// ambiguousCalls turns the store's pending reviews into the API's calls.
func ambiguousCalls(ps []runs.PendingReview) []api.AmbiguousCall {
	out := make([]api.AmbiguousCall, 0, len(ps))
	for _, p := range ps {
		var amb agent.AmbiguousError
		_ = json.Unmarshal(p.Data, &amb) // the worker wrote it; a bad one shows the ids only
		out = append(out, api.AmbiguousCall{StepID: p.StepID, Round: p.Round, CallID: p.CallID,
			Tool: amb.Tool, Arguments: amb.Arguments, Worker: amb.Worker})
	}
	return out
}

func reviewIDs(cs []api.AmbiguousCall) string {
	s := ""
	for i, c := range cs {
		if i > 0 {
			s += ", "
		}
		s += c.CallID + " (" + c.Tool + ")"
	}
	return s
}

// withReviews returns r as the API shows it: a waiting run whose steps
// wait on ambiguous calls is needs_review, so are those steps, and
// Reviews lists the calls.
func withReviews(ctx context.Context, rs *runs.Store, r runs.Run) (api.Run, error) {
	out := r.API()
	if r.Status != runs.RunWaiting {
		return out, nil
	}
	ps, err := rs.PendingReviews(ctx, r.ID)
	if err != nil || len(ps) == 0 {
		return out, err
	}
	out.Status = api.RunNeedsReview
	out.Reviews = ambiguousCalls(ps)
	for i, st := range out.Steps {
		for _, p := range ps {
			if st.ID == p.StepID && st.Status == api.StepWaiting {
				out.Steps[i].Status = api.StepNeedsReview
			}
		}
	}
	return out, nil
}

// withoutReviews drops the steps that wait for a review (not for an
// approval) from waiting: approvals do not decide them.
func withoutReviews(ctx context.Context, rs *runs.Store, runID string, waiting []runs.Step) ([]runs.Step, error) {
	if len(waiting) == 0 {
		return waiting, nil
	}
	ps, err := rs.PendingReviews(ctx, runID)
	if err != nil || len(ps) == 0 {
		return waiting, err
	}
	out := waiting[:0:0]
	for _, st := range waiting {
		review := false
		for _, p := range ps {
			review = review || p.StepID == st.ID
		}
		if !review {
			out = append(out, st)
		}
	}
	return out, nil
}
