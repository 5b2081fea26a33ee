package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/rath-run/rath/pkg/session"
)

// RunStatus is a run's state.
//
// A run is pending (queued) until its first step starts, then running;
// waiting while a step waits for a decision (an approval); and ends
// succeeded, failed, canceled or timed_out (its deadline passed).
type RunStatus string

// Run states.
const (
	RunPending RunStatus = "pending"
	RunRunning RunStatus = "running"
	// RunWaiting: a step of the run waits for a decision (an approval);
	// nothing of the run executes until it is made.
	RunWaiting RunStatus = "waiting"
	// RunNeedsReview: a step of the run stopped on an ambiguous tool call
	// (started by a worker that died, outcome unknown, not idempotent);
	// nothing of the run executes until a review (POST
	// /v1/runs/{id}/review) decides. Run.Reviews lists the calls.
	RunNeedsReview RunStatus = "needs_review"
	RunSucceeded   RunStatus = "succeeded"
	RunFailed      RunStatus = "failed"
	RunCanceled    RunStatus = "canceled"
	// RunTimedOut: the run's deadline passed before it ended.
	RunTimedOut RunStatus = "timed_out"
)

// Terminal reports whether the run has ended.
func (s RunStatus) Terminal() bool {
	return s == RunSucceeded || s == RunFailed || s == RunCanceled || s == RunTimedOut
}

// StepStatus is a step's state: pending until a worker starts it, running
// while it executes, waiting while paused for a decision, and ends
// committed (its version is in the graph), failed or canceled.
type StepStatus string

// Step states.
const (
	StepPending StepStatus = "pending"
	StepRunning StepStatus = "running"
	// StepWaiting: the step paused for a decision (an approval) and
	// resumes, or ends, once it is made.
	StepWaiting StepStatus = "waiting"
	// StepNeedsReview: the step stopped on an ambiguous tool call and
	// resumes, or fails, once a review decides.
	StepNeedsReview StepStatus = "needs_review"
	StepCommitted   StepStatus = "committed"
	StepFailed      StepStatus = "failed"
	StepCanceled    StepStatus = "canceled"
)

// Terminal reports whether the step has ended.
func (s StepStatus) Terminal() bool {
	return s == StepCommitted || s == StepFailed || s == StepCanceled
}

// RunKind says what settles a run.
type RunKind string

// Run kinds.
const (
	// KindAgent: one step through an agent; its commit settles the run.
	KindAgent RunKind = "agent"
	// KindWorkflow: steps added by a driver, which ends the run itself.
	KindWorkflow RunKind = "workflow"
)

// Drivers of workflow runs ([Run.Driver], [SubmitRequest.Driver]).
const (
	// DriverCoordinator: the coordinator drives the declarative workflow in
	// Run.Workflow, and resumes it after a restart.
	DriverCoordinator = "coordinator"
	// DriverClient: a program drives the run through the API (PUT
	// /v1/runs/{id}/steps/{key}, POST …/complete and …/fail).
	DriverClient = "client"
)

// Budget limits what a run's steps may spend together. Zero fields are
// unlimited. The worker enforces it: crossing it ends the step cleanly,
// recording why on the version it commits.
type Budget struct {
	MaxTokens int64 `json:"max_tokens,omitempty"`
	// MaxCostUSD is priced with the agent spec's pricing.
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
}

// IsZero reports whether the budget is unlimited.
func (b Budget) IsZero() bool { return b == Budget{} }

// Validate checks the budget, naming the bad field.
func (b Budget) Validate() error {
	switch {
	case b.MaxTokens < 0:
		return fmt.Errorf("budget.max_tokens: must be ≥ 0, got %d", b.MaxTokens)
	case !(b.MaxCostUSD >= 0) || b.MaxCostUSD > 1e12:
		return fmt.Errorf("budget.max_cost_usd: must be a number in 0..1e12, got %g", b.MaxCostUSD)
	}
	return nil
}

// Run is a run as the API returns it: POST /v1/runs, GET /v1/runs/{id}
// (with its steps), POST /v1/runs/{id}/cancel, …/complete, …/fail.
type Run struct {
	ID     string    `json:"id"`
	Kind   RunKind   `json:"kind"`
	Status RunStatus `json:"status"`
	// Driver is who drives a workflow run (DriverCoordinator,
	// DriverClient); empty for an agent run.
	Driver string `json:"driver,omitempty"`
	// Workflow is the declarative workflow file a coordinator-driven run
	// executes.
	Workflow string `json:"workflow,omitempty"`
	// Deadline, when set, ends the run timed_out once passed.
	Deadline *time.Time `json:"deadline,omitempty"`
	Queue    string     `json:"queue"`
	// Target is what the run forwards its input through (an agent spec).
	Target json.RawMessage `json:"target"`
	Input  session.ID      `json:"input"`
	Budget Budget          `json:"budget,omitzero"`
	// Output is the version the run produced, once it succeeded.
	Output *session.ID `json:"output,omitempty"`
	Error  string      `json:"error,omitempty"`
	// ChangesAcceptedAt, when set, is when the run's owner last accepted
	// (POST /v1/runs/{id}/accept-changes) that its re-executed workflow
	// gives steps other inputs than recorded: such steps keep their
	// recorded results instead of failing with code "nondeterministic".
	ChangesAcceptedAt *time.Time `json:"changes_accepted_at,omitempty"`
	// TraceContext is the W3C traceparent of the run's span: the run is
	// one trace, whose id is its second field (docs/observability.md).
	// Empty when the coordinator records no traces.
	TraceContext string `json:"trace_context,omitempty"`
	// Conversation is the root version the run's input descends from
	// (gen_ai.conversation.id on the run's spans).
	Conversation string    `json:"conversation,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
	// Steps are the run's steps (GET /v1/runs/{id} only).
	Steps []Step `json:"steps,omitempty"`
	// Reviews are the ambiguous tool calls the run waits on (status
	// needs_review; GET /v1/runs/{id} only).
	Reviews []AmbiguousCall `json:"reviews,omitempty"`
}

// AmbiguousCall is a tool call a worker started and recorded no result
// for before it died, to a tool not declared idempotent: whether its
// effect happened is unknown. Its step waits in needs_review.
type AmbiguousCall struct {
	StepID string `json:"step_id"`
	Round  int    `json:"round"`
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Arguments are the model's raw arguments, cut at 4 KiB.
	Arguments string `json:"arguments"`
	// Worker is the worker that started the call.
	Worker string `json:"worker"`
}

// Review decisions ([ReviewRequest.Decision]).
const (
	ReviewRetry = "retry"
	ReviewSkip  = "skip"
	ReviewFail  = "fail"
)

// ReviewRequest is the body of POST /v1/runs/{id}/review: the decision on
// an ambiguous call. CallID may be empty when the run waits on one call.
type ReviewRequest struct {
	CallID string `json:"call_id,omitempty"`
	// Decision: "retry" runs the call again; "skip" uses Result as the
	// call's result without running it; "fail" fails the step with Reason.
	Decision string `json:"decision"`
	// Result is the JSON the tool would have returned (skip only).
	Result json.RawMessage `json:"result,omitempty"`
	// Reason says why (required to fail).
	Reason string `json:"reason,omitempty"`
}

// ReviewResponse is the reply of POST /v1/runs/{id}/review: the call
// decided, the decision and the step, published again to resume.
type ReviewResponse struct {
	Call     AmbiguousCall `json:"call"`
	Decision string        `json:"decision"`
	Step     Step          `json:"step"`
}

// AcceptChangesReply is the reply of POST /v1/runs/{id}/accept-changes:
// the run, and whether it was reopened (it had failed because a step's
// input changed, and is running again for its driver to resume).
type AcceptChangesReply struct {
	Run      Run  `json:"run"`
	Reopened bool `json:"reopened"`
}

// Terminal reports whether the run has ended.
func (r Run) Terminal() bool { return r.Status.Terminal() }

// Step is one step of a run: forward Input through the step's Target (the
// run's target when empty).
type Step struct {
	ID    string `json:"id"`
	RunID string `json:"run_id"`
	// Key names the step within its run: ID is "<run>/<key>".
	Key     string `json:"key"`
	Ordinal int    `json:"ordinal"`
	// Target is the step's own call (a flow.Call), for workflow steps.
	Target json.RawMessage `json:"target,omitempty"`
	// Digest is the digest of the step's input version and call as
	// recorded ("sha256:…"); a re-executed driver that puts the key with
	// another gets 409 "nondeterministic".
	Digest     string      `json:"digest,omitempty"`
	Status     StepStatus  `json:"status"`
	Input      session.ID  `json:"input"`
	Output     *session.ID `json:"output,omitempty"`
	Attempts   int         `json:"attempts"`
	Worker     string      `json:"worker,omitempty"`
	Error      string      `json:"error,omitempty"`
	CreatedAt  time.Time   `json:"created_at"`
	UpdatedAt  time.Time   `json:"updated_at"`
	StartedAt  *time.Time  `json:"started_at,omitempty"`
	FinishedAt *time.Time  `json:"finished_at,omitempty"`
}

// Terminal reports whether the step has ended.
func (s Step) Terminal() bool { return s.Status.Terminal() }

// SubmitRequest is the body of POST /v1/runs. An agent run forwards a
// session (an existing version, or a new one holding Message) through
// Agent; a workflow run sets Workflow (a declarative workflow file the
// coordinator drives) or Driver "client" (a run the caller drives), and no
// Agent. Give exactly one of Message and Session.
type SubmitRequest struct {
	// Agent is the agent spec (JSON) of an agent run.
	Agent json.RawMessage `json:"agent,omitempty"`
	// Message starts a new session holding one user message.
	Message string `json:"message,omitempty"`
	// Session forwards an existing version.
	Session string `json:"session,omitempty"`
	// Queue selects the job queue; default the coordinator's.
	Queue string `json:"queue,omitempty"`
	// Budget limits what the run's steps may spend together.
	Budget Budget `json:"budget,omitzero"`
	// Timeout is the run's deadline from now (a Go duration, "10m"); past
	// it the run ends timed_out.
	Timeout string `json:"timeout,omitempty"`
	// Driver "client" opens a workflow run the caller drives (PUT
	// /v1/runs/{id}/steps/{key}); Agent must be empty.
	Driver string `json:"driver,omitempty"`
	// Workflow is a declarative workflow file (YAML, self-contained) the
	// coordinator drives; Agent must be empty.
	Workflow string `json:"workflow,omitempty"`
}

// RunList is the reply of GET /v1/runs?limit=&before=&status=: runs,
// newest first. The next page is the runs before the last one's id.
type RunList struct {
	Runs []Run `json:"runs"`
}

// ListRunsParams are the query of GET /v1/runs.
type ListRunsParams struct {
	// Limit is how many runs (0: the server's default).
	Limit int
	// Before lists the runs older than this run id (the previous page's
	// last).
	Before string
	// Status lists only runs in this state.
	Status RunStatus
}

// StepRequest is the body of PUT /v1/runs/{id}/steps/{key}.
type StepRequest struct {
	// Call is the step's flow.Call (or a bare agent spec).
	Call json.RawMessage `json:"call"`
	// Input is the session version the step forwards.
	Input string `json:"input"`
}

// OutcomeRequest is the body of POST /v1/runs/{id}/complete (Output) and
// …/fail (Error).
type OutcomeRequest struct {
	Output string `json:"output,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Approval decisions ([ApprovalRequest.Decision], [Decision.Decision]).
const (
	DecisionApprove = "approve"
	DecisionReject  = "reject"
	// DecisionApproved and DecisionRejected are what a recorded decision
	// says (and are accepted in a request too).
	DecisionApproved = "approved"
	DecisionRejected = "rejected"
)

// ApprovalRequest is the body of POST /v1/runs/{id}/approvals.
type ApprovalRequest struct {
	// CallID decides one pending call; empty decides every call still
	// pending.
	CallID string `json:"call_id,omitempty"`
	// Decision is "approve" or "reject" ("approved", "rejected" too).
	Decision string `json:"decision"`
	// Reason is required to reject; it reaches the model in the call's
	// error body.
	Reason string `json:"reason,omitempty"`
}

// PendingCall is a tool call a waiting step paused before.
type PendingCall struct {
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Arguments are the model's raw arguments, cut at 4 KiB.
	Arguments string `json:"arguments"`
}

// Decision is a decision recorded on one pending call.
type Decision struct {
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Decision is DecisionApproved or DecisionRejected.
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
	// By names who decided (a token's name or "token:<id>", "api").
	By string `json:"by,omitempty"`
}

// ApprovalResponse is the reply of POST /v1/runs/{id}/approvals: what the
// decision did.
type ApprovalResponse struct {
	Run Run `json:"run"`
	// Decided are the decisions this request recorded (empty when it
	// repeated earlier ones).
	Decided []Decision `json:"decided"`
	// Pending are the calls still waiting.
	Pending []PendingCall `json:"pending"`
	// Continuation is the step that resumes the run, once nothing is
	// pending.
	Continuation *Step `json:"continuation,omitempty"`
}

// Event types of a run's event stream (GET /v1/runs/{id}/events; docs/api.md
// lists what each carries). The list is open: a stream may carry others.
const (
	EventRunSubmitted = "run.submitted"
	EventRunWaiting   = "run.waiting"
	// EventRunNeedsReview carries the ambiguous call (AmbiguousCall's
	// fields but step_id) a step of the run stopped on; the run waits for
	// a review. EventStepNeedsReview is the step's.
	EventRunNeedsReview  = "run.needs_review"
	EventStepNeedsReview = "step.needs_review"
	EventReviewDecided   = "review.decided"
	EventRunCompleted    = "run.completed"
	EventRunFailed       = "run.failed"
	EventRunCanceled     = "run.canceled"
	EventRunTimedOut     = "run.timed_out"
	EventStepStarted     = "step.started"
	EventStepToken       = "step.token"
	EventStepToolCall    = "step.tool_call"
	EventStepToolResult  = "step.tool_result"
	EventStepCommitted   = "step.committed"
	EventStepFailed      = "step.failed"
	EventStepContinued   = "step.continued"
	EventApprovalDecided = "approval.decided"
	// EventMissing says that some of the run's first events are no longer
	// stored on the server; the stream still ends with the run's end.
	EventMissing = "events.missing"
)

// Event is one run event: the data of one server-sent event of GET
// /v1/runs/{id}/events.
type Event struct {
	// ID is the event's place in the server's events stream, sent as the
	// SSE id (not in the data): a watch resumes after it. 0 for an event
	// the server made for this stream (an end made from the stored run, a
	// notice), which has no place to resume from.
	ID     uint64          `json:"id,omitempty"`
	RunID  string          `json:"run_id"`
	StepID string          `json:"step_id,omitempty"`
	Type   string          `json:"type"`
	Time   time.Time       `json:"time"`
	Data   json.RawMessage `json:"data,omitempty"`
}

// EndsRun reports whether an event of type typ is a run's end:
// run.completed, run.failed, run.canceled or run.timed_out. A stream ends
// after it.
func EndsRun(typ string) bool {
	return strings.HasPrefix(typ, "run.") && typ != EventRunSubmitted && typ != EventRunWaiting &&
		typ != EventRunNeedsReview
}

// EndsRun reports whether e is a run's end (see [EndsRun]).
func (e Event) EndsRun() bool { return EndsRun(e.Type) }

// Token returns the text of a step.token event ("" for other events).
func (e Event) Token() string {
	if e.Type != EventStepToken {
		return ""
	}
	var d struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(e.Data, &d)
	return d.Text
}

// End is what a run's end event (and run.waiting) carries.
type End struct {
	// Output is the run's output session version, when it has one.
	Output string `json:"output,omitempty"`
	// Error is why the run did not succeed.
	Error string `json:"error,omitempty"`
}

// End decodes the data of a run's end event (or run.waiting); ok is false
// for other events.
func (e Event) End() (End, bool) {
	if !e.EndsRun() && e.Type != EventRunWaiting {
		return End{}, false
	}
	var d struct {
		Output *string `json:"output"`
		Error  string  `json:"error"`
	}
	_ = json.Unmarshal(e.Data, &d)
	end := End{Error: d.Error}
	if d.Output != nil {
		end.Output = *d.Output
	}
	return end, true
}

// ApprovalDecided is the data of an approval.decided event: one decision
// recorded on a waiting step.
type ApprovalDecided struct {
	CallID   string `json:"call_id"`
	Tool     string `json:"tool"`
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
	By       string `json:"by"`
	// Version is the version that records the decision.
	Version session.ID `json:"version"`
}

// StepContinued is the data of a step.continued event: a decided waiting
// step resumes as step Continuation, forwarding Input (the version that
// records the decisions).
type StepContinued struct {
	Continuation string     `json:"continuation"`
	Input        session.ID `json:"input"`
}

// EventsMissingData is the data of an events.missing event.
type EventsMissingData struct {
	Message string `json:"message"`
}
