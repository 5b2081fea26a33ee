package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Run is a run as the API returns it (docs/api.md).
type Run struct {
	ID       string     `json:"id"`
	Kind     string     `json:"kind"`
	Status   string     `json:"status"`
	Driver   string     `json:"driver,omitempty"`
	Deadline *time.Time `json:"deadline,omitempty"`
	Queue    string     `json:"queue"`
	// Target is what the run forwards its input through (an agent run's
	// agent spec).
	Target json.RawMessage `json:"target,omitempty"`
	Input  string          `json:"input"`
	Output string          `json:"output,omitempty"`
	Error  string          `json:"error,omitempty"`
	Budget Budget          `json:"budget,omitzero"`
	Steps  []Step          `json:"steps,omitempty"`
}

// Terminal reports whether the run has ended.
func (r Run) Terminal() bool {
	switch r.Status {
	case "succeeded", "failed", "canceled", "timed_out":
		return true
	}
	return false
}

// Budget limits what a run's steps may spend together; zero fields are
// unlimited.
type Budget struct {
	MaxTokens  int64   `json:"max_tokens,omitempty"`
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
}

// Step is one step of a run.
type Step struct {
	ID       string          `json:"id"`
	RunID    string          `json:"run_id"`
	Key      string          `json:"key"`
	Status   string          `json:"status"`
	Target   json.RawMessage `json:"target,omitempty"`
	Input    string          `json:"input"`
	Output   string          `json:"output,omitempty"`
	Attempts int             `json:"attempts"`
	Worker   string          `json:"worker,omitempty"`
	Error    string          `json:"error,omitempty"`
}

// Terminal reports whether the step has ended.
func (s Step) Terminal() bool {
	return s.Status == "committed" || s.Status == "failed" || s.Status == "canceled"
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
	Budget   Budget
	// Timeout, when positive, is the run's deadline from now.
	Timeout time.Duration
}

// StartWorkflow opens a workflow run (POST /v1/runs).
func (c *Client) StartWorkflow(ctx context.Context, req WorkflowRequest) (Run, error) {
	body := map[string]any{}
	if req.Workflow != "" {
		body["workflow"] = req.Workflow
	} else {
		body["driver"] = "client"
	}
	for k, v := range map[string]string{"message": req.Message, "session": req.Session, "queue": req.Queue} {
		if v != "" {
			body[k] = v
		}
	}
	if req.Budget != (Budget{}) {
		body["budget"] = req.Budget
	}
	if req.Timeout > 0 {
		body["timeout"] = req.Timeout.String()
	}
	var r Run
	err := c.Do(ctx, http.MethodPost, "/v1/runs", body, &r)
	return r, err
}

// GetRun returns a run with its steps.
func (c *Client) GetRun(ctx context.Context, runID string) (Run, error) {
	var r Run
	err := c.Do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(runID), nil, &r)
	return r, err
}

// CancelRun cancels a run; its running steps are aborted.
func (c *Client) CancelRun(ctx context.Context, runID string) (Run, error) {
	var r Run
	err := c.Do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(runID)+"/cancel", nil, &r)
	return r, err
}

// PutStep records (idempotently) and starts the step key of a workflow
// run: forward version input through call (a flow.Call as JSON). A key that
// exists returns the stored step, with its output once committed.
func (c *Client) PutStep(ctx context.Context, runID, key string, call json.RawMessage, input string) (Step, error) {
	var st Step
	err := c.Do(ctx, http.MethodPut, stepPath(runID, key), map[string]any{"call": call, "input": input}, &st)
	return st, err
}

// PutStepWait is [Client.PutStep] that then waits, in the same request,
// up to wait (at most a minute) for the step to end: one round trip for a
// step that ends within wait. A step still running when wait passes is
// returned as it is; wait for it with [Client.GetStep]. (A coordinator
// older than this request returns at once, as PutStep does.)
func (c *Client) PutStepWait(ctx context.Context, runID, key string, call json.RawMessage, input string, wait time.Duration) (Step, error) {
	p := stepPath(runID, key)
	if wait > 0 {
		p += "?wait=" + url.QueryEscape(wait.String())
	}
	var st Step
	err := c.Do(ctx, http.MethodPut, p, map[string]any{"call": call, "input": input}, &st)
	return st, err
}

// GetStep returns the step key of a run; with wait > 0 the coordinator
// holds the request until the step ends or wait passes (at most a minute).
func (c *Client) GetStep(ctx context.Context, runID, key string, wait time.Duration) (Step, error) {
	p := stepPath(runID, key)
	if wait > 0 {
		p += "?wait=" + url.QueryEscape(wait.String())
	}
	var st Step
	err := c.Do(ctx, http.MethodGet, p, nil, &st)
	return st, err
}

// CompleteRun ends a workflow run succeeded with output (a version id).
func (c *Client) CompleteRun(ctx context.Context, runID, output string) (Run, error) {
	var r Run
	err := c.Do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(runID)+"/complete", map[string]string{"output": output}, &r)
	return r, err
}

// FailRun ends a workflow run failed with reason.
func (c *Client) FailRun(ctx context.Context, runID, reason string) (Run, error) {
	if reason == "" {
		return Run{}, fmt.Errorf("client: fail run %s: empty reason", runID)
	}
	var r Run
	err := c.Do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(runID)+"/fail", map[string]string{"error": reason}, &r)
	return r, err
}

func stepPath(runID, key string) string {
	return "/v1/runs/" + url.PathEscape(runID) + "/steps/" + url.PathEscape(key)
}
