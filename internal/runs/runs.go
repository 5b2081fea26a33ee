// Package runs records runs and their steps: what was submitted, which steps
// it spawned, and how each ended. The Session Graph holds the results; this
// package holds the bookkeeping that drives and reports execution.
//
// # States
//
// A run is pending (the API documents it as queued) until its first step
// starts, then running; waiting while a step waits for a decision (an
// approval); and ends succeeded, failed, canceled or timed_out (its
// deadline passed). Ending a run any way but succeeded cancels its
// unfinished steps; a worker running one sees that at its next heartbeat
// ([Store.Touch] returns ErrTerminal) and aborts the step.
//
// A step is pending until a worker starts it, running while it executes,
// waiting while paused for a decision, and ends committed (its version is
// in the graph), failed (with a recorded reason) or canceled.
//
//	pending ──► running ◄──► waiting
//	   │           │            │
//	   └───────────┴────────────┴──► committed | failed | canceled
//
// # Kinds
//
// An agent run ([KindAgent]) has one step, and its commit settles the run.
// A workflow run ([KindWorkflow]) gets its steps from a driver — the
// coordinator for a declarative workflow, or a user's program through the
// API — which also ends it ([Store.Complete], [Store.FailRun]): the run's
// output is what the driver computed, not "the last step".
//
// Step ids are deterministic: "<run>/<ordinal>" for an agent run's step,
// "<run>/<key>" for a workflow's (keys from flow.NextKey), and
// [Store.PutStep] with an existing key returns the stored step, so a driver
// that re-runs a run's code finds the steps it already made. Each step
// keeps the digest of its input and call (flow.StepDigest): the
// coordinator refuses a re-executed key whose digest changed
// (flow.ErrNondeterministic) unless the run accepts changes
// ([Store.AcceptChanges]). A step's
// version is committed with the step id as its idempotency key: that, not
// this package, is what makes a step commit exactly once.
//
// The store works on Postgres (pgx's database/sql driver) and on the
// embedded SQLite store with the same SQL.
package runs

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/session"
)

// RunStatus is a run's state (the API's type: package api).
type RunStatus = api.RunStatus

// Run states.
const (
	RunPending = api.RunPending
	RunRunning = api.RunRunning
	// RunWaiting: a step of the run waits for a decision (an approval);
	// nothing of the run executes until it is made.
	RunWaiting = api.RunWaiting
	// RunNeedsReview: a waiting run whose step stopped on an ambiguous
	// tool call. The store keeps it as RunWaiting; List derives it (see
	// review.go).
	RunNeedsReview = api.RunNeedsReview
	RunSucceeded   = api.RunSucceeded
	RunFailed      = api.RunFailed
	RunCanceled    = api.RunCanceled
	// RunTimedOut: the run's deadline passed before it ended.
	RunTimedOut = api.RunTimedOut
)

// RunStatuses lists every run state.
func RunStatuses() []RunStatus {
	return []RunStatus{RunPending, RunRunning, RunWaiting, RunSucceeded, RunFailed, RunCanceled, RunTimedOut}
}

// StepStatus is a step's state (the API's type: package api).
type StepStatus = api.StepStatus

// Step states.
const (
	StepPending = api.StepPending
	StepRunning = api.StepRunning
	// StepWaiting: the step paused for a decision (an approval) and
	// resumes, or ends, once it is made.
	StepWaiting   = api.StepWaiting
	StepCommitted = api.StepCommitted
	StepFailed    = api.StepFailed
	StepCanceled  = api.StepCanceled
)

// StepStatuses lists every step state.
func StepStatuses() []StepStatus {
	return []StepStatus{StepPending, StepRunning, StepWaiting, StepCommitted, StepFailed, StepCanceled}
}

// Sentinel errors.
var (
	ErrNotFound = errors.New("rath: run or step not found")
	// ErrTerminal: the run or step has already ended.
	ErrTerminal = errors.New("rath: run already ended")
	// ErrCommitted: the step has ended committed ([Store.Touch] wraps it
	// with ErrTerminal): its version is in the graph, so the step is not
	// aborted — a delivery whose own commit crossed the touch would lose
	// its events, and another delivery's commit settles this one's as a
	// replay.
	ErrCommitted = errors.New("rath: step committed")
)

// RunKind says what settles a run (the API's type: package api).
type RunKind = api.RunKind

// Run kinds.
const (
	// KindAgent: one step through an agent; its commit settles the run.
	KindAgent = api.KindAgent
	// KindWorkflow: steps added by a driver (PutStep), which ends the run
	// itself (Complete, FailRun); committing steps never does.
	KindWorkflow = api.KindWorkflow
)

// Drivers of workflow runs.
const (
	// DriverCoordinator: the coordinator drives the declarative workflow in
	// Run.Workflow, and resumes it after a restart.
	DriverCoordinator = api.DriverCoordinator
	// DriverClient: a program drives the run through the API (the SDK's
	// cluster runtime).
	DriverClient = api.DriverClient
)

// Run is one submission.
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
	// Budget limits what the run's steps may spend together; the zero
	// Budget is unlimited.
	Budget Budget `json:"budget,omitzero"`
	// Output is the version the run produced, once it succeeded.
	Output *session.ID `json:"output,omitempty"`
	Error  string      `json:"error,omitempty"`
	// ChangesAcceptedAt, when set, is when the run's owner accepted that
	// its re-executed workflow gives steps other inputs than recorded
	// ([Store.AcceptChanges]): such a step keeps its recorded result
	// instead of failing with flow.ErrNondeterministic.
	ChangesAcceptedAt *time.Time `json:"changes_accepted_at,omitempty"`
	// TraceContext is the W3C traceparent of the run's span, recorded at
	// submission: every step the run publishes is its child, so a run is
	// one trace across coordinators and restarts. Empty with tracing off.
	TraceContext string `json:"trace_context,omitempty"`
	// Conversation is the id of the root version the run's input
	// descends from (gen_ai.conversation.id on the run's spans); empty
	// for runs recorded before runs carried it.
	Conversation string    `json:"conversation,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
	Steps        []Step    `json:"steps,omitempty"`
	// Reviews are the ambiguous calls a waiting run's steps wait on; the
	// store does not fill it (PendingReviews does; the API shows the run
	// as needs_review when it holds any).
	Reviews []api.AmbiguousCall `json:"reviews,omitempty"`
}

// Budget limits what a run may spend (the API's type: package api). Zero
// fields are unlimited. The worker enforces it: crossing it ends the step
// cleanly, recording why on the version it commits.
type Budget = api.Budget

// Step is one unit of work: forward Input through the step's Target (the
// run's target when empty).
type Step struct {
	ID    string `json:"id"`
	RunID string `json:"run_id"`
	// Key names the step within its run: ID is "<run>/<key>".
	Key     string `json:"key"`
	Ordinal int    `json:"ordinal"`
	// Target is the step's own call (a flow.Call), for workflow steps.
	Target json.RawMessage `json:"target,omitempty"`
	// Digest is the digest of the step's input and target as recorded
	// (flow.StepDigest); empty for steps recorded before digests were.
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
	// RedactionEpoch is the graph's redaction epoch as the statement that
	// started the step read it (StartStep's one-statement path on
	// Postgres, where the graph shares the database); EpochKnown is false
	// otherwise. A worker syncs its graph cache with it
	// (pgstore.Store.VersionAndTranscriptAt) instead of reading it again.
	RedactionEpoch int64 `json:"-"`
	EpochKnown     bool  `json:"-"`
}

// StepID returns the deterministic id of a run's step at ordinal.
func StepID(runID string, ordinal int) string { return fmt.Sprintf("%s/%d", runID, ordinal) }

// MaxKeyLen is the longest step key.
const MaxKeyLen = 160

// KeyedStepID returns the id of a run's step named key: "<run>/<key>".
func KeyedStepID(runID, key string) string { return runID + "/" + key }

// ValidKey checks a step key: 1..MaxKeyLen bytes of [A-Za-z0-9._-] (the
// keys flow.NextKey makes).
func ValidKey(key string) error {
	if key == "" || len(key) > MaxKeyLen {
		return fmt.Errorf("step key %q: want 1..%d bytes of [A-Za-z0-9._-]", key, MaxKeyLen)
	}
	for i := range len(key) {
		c := key[i]
		ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("step key %q: byte %d (%q) is not in [A-Za-z0-9._-]", key, i, c)
		}
	}
	return nil
}

// NewRunID returns a fresh, time-ordered run id.
func NewRunID() string { return "run_" + session.NewID().String() }
