package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/session"
)

// SubmitAgent submits an agent run (POST /v1/runs): req.Agent (an agent
// spec as JSON) forwards a new session holding req.Message, or the
// existing version req.Session. The run is durable once it returns; follow
// it with [Client.WatchRun] or [Client.WaitRun].
func (c *Client) SubmitAgent(ctx context.Context, req api.SubmitRequest) (api.Run, error) {
	switch {
	case len(req.Agent) == 0:
		return api.Run{}, fmt.Errorf("client: submit agent run: agent: required")
	case req.Workflow != "" || req.Driver != "":
		return api.Run{}, fmt.Errorf("client: submit agent run: workflow and driver are for workflow runs (SubmitWorkflow)")
	}
	return c.submit(ctx, req)
}

// SubmitWorkflow submits a workflow run (POST /v1/runs): req.Workflow (a
// self-contained declarative workflow file the coordinator drives) or
// req.Driver "client" (a run the caller drives with [Client.PutStep],
// [Client.CompleteRun] and [Client.FailRun]), and no agent.
func (c *Client) SubmitWorkflow(ctx context.Context, req api.SubmitRequest) (api.Run, error) {
	switch {
	case len(req.Agent) != 0:
		return api.Run{}, fmt.Errorf("client: submit workflow run: agent: not allowed (SubmitAgent)")
	case req.Workflow == "" && req.Driver != api.DriverClient:
		return api.Run{}, fmt.Errorf("client: submit workflow run: give workflow, or driver %q", api.DriverClient)
	}
	return c.submit(ctx, req)
}

func (c *Client) submit(ctx context.Context, req api.SubmitRequest) (api.Run, error) {
	var r api.Run
	err := c.Do(ctx, http.MethodPost, "/v1/runs", req, &r)
	return r, err
}

// WorkflowRequest opens a workflow run: one the caller drives (Workflow
// empty; see package flow/cluster), or a declarative workflow file the
// coordinator drives. Give Message or Session.
type WorkflowRequest struct {
	// Workflow is a self-contained workflow file (YAML) for the
	// coordinator to drive; empty opens a run the caller drives.
	Workflow string
	Message  string
	Session  string
	Queue    string
	Budget   api.Budget
	// Timeout, when positive, is the run's deadline from now.
	Timeout time.Duration
}

// StartWorkflow opens a workflow run (POST /v1/runs): [Client.SubmitWorkflow]
// with the driver set for an empty req.Workflow and the timeout as a
// duration.
func (c *Client) StartWorkflow(ctx context.Context, req WorkflowRequest) (api.Run, error) {
	body := api.SubmitRequest{Workflow: req.Workflow, Message: req.Message, Session: req.Session, Queue: req.Queue, Budget: req.Budget}
	if req.Workflow == "" {
		body.Driver = api.DriverClient
	}
	if req.Timeout > 0 {
		body.Timeout = req.Timeout.String()
	}
	return c.SubmitWorkflow(ctx, body)
}

// GetRun returns a run with its steps (GET /v1/runs/{id}). An unknown run
// (or one of another tenant) is an error matching [ErrNotFound].
func (c *Client) GetRun(ctx context.Context, runID string) (api.Run, error) {
	if runID == "" {
		return api.Run{}, fmt.Errorf("client: get run: run id is empty")
	}
	var r api.Run
	err := c.Do(ctx, http.MethodGet, runPath(runID), nil, &r)
	return r, err
}

// ListRuns lists runs newest first (GET /v1/runs), without their steps.
// The next page is p with Before set to the last run's id.
func (c *Client) ListRuns(ctx context.Context, p api.ListRunsParams) (api.RunList, error) {
	if p.Limit < 0 {
		return api.RunList{}, fmt.Errorf("client: list runs: limit: %d is negative", p.Limit)
	}
	q := url.Values{}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.Before != "" {
		q.Set("before", p.Before)
	}
	if p.Status != "" {
		q.Set("status", string(p.Status))
	}
	path := "/v1/runs"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var l api.RunList
	err := c.Do(ctx, http.MethodGet, path, nil, &l)
	return l, err
}

// CancelRun cancels a run (POST /v1/runs/{id}/cancel); its running steps
// are aborted. Canceling an ended run is a conflict ([APIError] 409).
func (c *Client) CancelRun(ctx context.Context, runID string) (api.Run, error) {
	var r api.Run
	err := c.Do(ctx, http.MethodPost, runPath(runID)+"/cancel", nil, &r)
	return r, err
}

// Decide records a decision on the tool calls a waiting run paused before
// (POST /v1/runs/{id}/approvals): req.CallID, or every call still pending
// when it is empty. Once none is pending the run continues (the response's
// Continuation). Repeating a decision changes nothing; a run with nothing
// waiting is a conflict ([APIError] 409).
func (c *Client) Decide(ctx context.Context, runID string, req api.ApprovalRequest) (api.ApprovalResponse, error) {
	var res api.ApprovalResponse
	err := c.Do(ctx, http.MethodPost, runPath(runID)+"/approvals", req, &res)
	return res, err
}

// Approve approves a waiting run's pending call callID (every pending call
// when callID is empty): [Client.Decide] with decision approve.
func (c *Client) Approve(ctx context.Context, runID, callID string) (api.ApprovalResponse, error) {
	return c.Decide(ctx, runID, api.ApprovalRequest{CallID: callID, Decision: api.DecisionApprove})
}

// Reject rejects a waiting run's pending call callID (every pending call
// when callID is empty); reason, required, reaches the model.
func (c *Client) Reject(ctx context.Context, runID, callID, reason string) (api.ApprovalResponse, error) {
	if reason == "" {
		return api.ApprovalResponse{}, fmt.Errorf("client: reject: reason: required (the model is told why)")
	}
	return c.Decide(ctx, runID, api.ApprovalRequest{CallID: callID, Decision: api.DecisionReject, Reason: reason})
}

// settlePoll is how often [Client.Settled] reads the run.
const settlePoll = 100 * time.Millisecond

// WaitRun follows a run's events ([Client.WatchRun]) until it ends or
// waits for a decision, and returns the stored run then: terminal
// (check Status: succeeded, failed, canceled, timed_out), waiting
// (decide with [Client.Decide], then call WaitRun again) or needs_review
// (decide with [Client.Review], then call WaitRun again).
func (c *Client) WaitRun(ctx context.Context, runID string) (api.Run, error) {
	if err := c.Watch(ctx, runID, func(api.Event) error { return nil }); err != nil {
		return api.Run{}, err
	}
	return c.Settled(ctx, runID)
}

// Settled returns the run once it is stored as ended, waiting or in
// needs_review, reading
// it every 100 ms until then or until ctx ends: after a run's end event,
// the stored run is the truth, and it may lag the event a moment.
func (c *Client) Settled(ctx context.Context, runID string) (api.Run, error) {
	tick := time.NewTicker(settlePoll)
	defer tick.Stop()
	for {
		r, err := c.GetRun(ctx, runID)
		if err != nil || r.Status.Terminal() || r.Status == api.RunWaiting || r.Status == api.RunNeedsReview {
			return r, err
		}
		select {
		case <-ctx.Done():
			return r, fmt.Errorf("run %s is %s: %w", runID, r.Status, ctx.Err())
		case <-tick.C:
		}
	}
}

// PutStep records (idempotently) and starts the step key of a workflow
// run (PUT /v1/runs/{id}/steps/{key}): forward version input through call
// (a flow.Call as JSON). A key that exists returns the stored step, with
// its output once committed, when it was recorded with the same input and
// call; else it fails with an error matching [ErrNondeterministic]
// (naming the key and both digests) unless the run accepts changes
// ([Client.AcceptChanges]).
func (c *Client) PutStep(ctx context.Context, runID, key string, call json.RawMessage, input session.ID) (api.Step, error) {
	var st api.Step
	err := c.Do(ctx, http.MethodPut, stepPath(runID, key), api.StepRequest{Call: call, Input: input.String()}, &st)
	return st, err
}

// PutStepWait is [Client.PutStep] that then waits, in the same request,
// up to wait (at most a minute) for the step to end: one round trip for a
// step that ends within wait. A step still running when wait passes is
// returned as it is; wait for it with [Client.GetStep]. (A coordinator
// older than this request returns at once, as PutStep does.)
func (c *Client) PutStepWait(ctx context.Context, runID, key string, call json.RawMessage, input session.ID, wait time.Duration) (api.Step, error) {
	p := stepPath(runID, key)
	if wait > 0 {
		p += "?wait=" + url.QueryEscape(wait.String())
	}
	var st api.Step
	err := c.Do(ctx, http.MethodPut, p, api.StepRequest{Call: call, Input: input.String()}, &st)
	return st, err
}

// GetStep returns the step key of a run (GET /v1/runs/{id}/steps/{key});
// with wait > 0 the coordinator holds the request until the step ends or
// wait passes (at most a minute).
func (c *Client) GetStep(ctx context.Context, runID, key string, wait time.Duration) (api.Step, error) {
	p := stepPath(runID, key)
	if wait > 0 {
		p += "?wait=" + url.QueryEscape(wait.String())
	}
	var st api.Step
	err := c.Do(ctx, http.MethodGet, p, nil, &st)
	return st, err
}

// CompleteRun ends a workflow run succeeded with output, a version id
// (POST /v1/runs/{id}/complete).
func (c *Client) CompleteRun(ctx context.Context, runID string, output session.ID) (api.Run, error) {
	var r api.Run
	err := c.Do(ctx, http.MethodPost, runPath(runID)+"/complete", api.OutcomeRequest{Output: output.String()}, &r)
	return r, err
}

// AcceptChanges records that the caller accepts that run runID,
// re-executed, gives steps other inputs or calls than recorded (POST
// /v1/runs/{id}/accept-changes): such steps keep their recorded results
// instead of failing with [ErrNondeterministic]. The acceptance is kept on
// the run (ChangesAcceptedAt) and as a run.changes_accepted event. A run
// that failed because a step changed is reopened (reply.Reopened): its
// driver resumes it (the coordinator for a workflow file; a program
// re-executes its workflow on the run).
func (c *Client) AcceptChanges(ctx context.Context, runID string) (api.AcceptChangesReply, error) {
	var out api.AcceptChangesReply
	err := c.Do(ctx, http.MethodPost, runPath(runID)+"/accept-changes", nil, &out)
	return out, err
}

// FailRun ends a workflow run failed with reason (POST
// /v1/runs/{id}/fail).
func (c *Client) FailRun(ctx context.Context, runID, reason string) (api.Run, error) {
	if reason == "" {
		return api.Run{}, fmt.Errorf("client: fail run %s: empty reason", runID)
	}
	var r api.Run
	err := c.Do(ctx, http.MethodPost, runPath(runID)+"/fail", api.OutcomeRequest{Error: reason}, &r)
	return r, err
}

func runPath(runID string) string { return "/v1/runs/" + url.PathEscape(runID) }

func stepPath(runID, key string) string {
	return runPath(runID) + "/steps/" + url.PathEscape(key)
}

// Review decides an ambiguous tool call a run in needs_review stopped on
// (req.CallID, or the only one): retry runs it again, skip uses
// req.Result as its result without running it, fail fails the step with
// req.Reason. The step resumes at once (POST /v1/runs/{id}/review).
func (c *Client) Review(ctx context.Context, runID string, req api.ReviewRequest) (api.ReviewResponse, error) {
	var res api.ReviewResponse
	err := c.Do(ctx, http.MethodPost, runPath(runID)+"/review", req, &res)
	return res, err
}
