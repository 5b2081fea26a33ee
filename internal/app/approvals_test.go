package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/sandbox/sandboxtest"
	"github.com/rath-run/rath/pkg/session"
)

// gatedSpec: one round writing a file and running a shell command that
// appends to marker (a host path outside the workspace, so every execution
// is counted); run_shell_command needs approval, so the whole round waits.
func gatedSpec(marker string) string {
	return fmt.Sprintf(`{
  "name": "deployer", "model": "scripted", "tools": ["builtin"], "approve": ["run_shell_command"],
  "script": [
    {"content": "Deploying.", "tool_calls": [
      {"id": "w1", "function": {"name": "write_workspace_file", "arguments": {"path": "plan.md", "content": "ship"}}},
      {"id": "sh1", "function": {"name": "run_shell_command", "arguments": {"cmd": "echo ran >> %s"}}}
    ]},
    {"content": "Done."}
  ]
}`, marker)
}

// markerPath is a file outside the workspace that the tools write to count
// executions. Its directory is writable by everyone: a root worker runs
// local tools as nobody.
func markerPath(t *testing.T) string {
	t.Helper()
	dir := sandboxtest.Dir(t)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "marker")
}

func executions(t *testing.T, marker string) int {
	t.Helper()
	b, err := os.ReadFile(marker)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "ran\n")
}

func (s *stack) waitStatus(t *testing.T, id string, want runs.RunStatus) runs.Run {
	t.Helper()
	var r runs.Run
	testenv.Eventually(t, 30*time.Second, "run "+id+" to be "+string(want), func() bool {
		r = runs.Run{}
		if err := s.cl.Do(context.Background(), "GET", "/v1/runs/"+id, nil, &r); err != nil {
			t.Fatalf("get run: %v", err)
		}
		if r.Status.Terminal() && r.Status != want {
			t.Fatalf("run ended %s (%s), want %s", r.Status, r.Error, want)
		}
		return r.Status == want
	})
	return r
}

func (s *stack) drained(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	testenv.Eventually(t, 20*time.Second, "the job queue to drain", func() bool {
		cons, err := s.dev.Backend.Bus.JetStream().Consumer(ctx, "RATH_JOBS", "jobs-default")
		if err != nil {
			return false
		}
		info, err := cons.Info(ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	})
}

func (s *stack) decide(t *testing.T, runID string, req api.ApprovalRequest) (api.ApprovalResponse, error) {
	t.Helper()
	var res api.ApprovalResponse
	err := s.cl.Do(context.Background(), "POST", "/v1/runs/"+runID+"/approvals", req, &res)
	return res, err
}

// TestApprovalWaitApprove runs a gated agent on the dev stack: the run
// waits with nothing executed, a redelivered job of the waiting step runs
// nothing either, approval resumes it on a continuation step that runs the
// round once, and the decision is an approval chunk in the transcript.
func TestApprovalWaitApprove(t *testing.T) {
	t.Parallel()
	s := startDev(t, "", app.DevConfig{Workers: 1})
	ctx := context.Background()
	marker := markerPath(t)
	r := s.submit(t, gatedSpec(marker), "Ship it.")
	var events []string
	if err := s.cl.Watch(ctx, r.ID, func(e api.Event) error { events = append(events, e.Type); return nil }); err != nil {
		t.Fatalf("watch: %v", err)
	}
	if last := events[len(events)-1]; last != "run.waiting" || !slices.Contains(events, "step.waiting") {
		t.Fatalf("events = %v, want step.waiting and a stream ending at run.waiting", events)
	}
	r = s.waitStatus(t, r.ID, runs.RunWaiting)
	step := r.Steps[0]
	if step.Status != runs.StepWaiting || step.Output == nil || executions(t, marker) != 0 {
		t.Fatalf("waiting step %+v, %d executions", step, executions(t, marker))
	}

	// A duplicated job of the waiting step (a fresh message id, as a
	// reconciler or a redelivery would bring) executes nothing.
	job := bus.Job{V: bus.JobVersion, StepID: step.ID, RunID: r.ID, Queue: r.Queue, Input: step.Input.String(), Target: r.Target}
	if _, err := s.dev.Backend.Bus.Publish(ctx, job, map[string][]string{bus.HeaderMsgID: {step.ID + "/dup"}}); err != nil {
		t.Fatal(err)
	}
	s.drained(t)
	again, err := s.dev.Backend.Runs.GetStep(ctx, step.ID)
	if err != nil || again.Status != runs.StepWaiting || again.Attempts != step.Attempts || executions(t, marker) != 0 {
		t.Fatalf("after a duplicate job: step %+v, %v, %d executions", again, err, executions(t, marker))
	}

	// Bad decisions are refused, naming the field, and record nothing.
	for _, bad := range []api.ApprovalRequest{
		{Decision: "maybe"},
		{Decision: "reject"},
		{Decision: "approve", CallID: "nosuch"},
	} {
		if _, err := s.decide(t, r.ID, bad); !isStatus(err, http.StatusBadRequest) {
			t.Errorf("decision %+v: err = %v, want 400", bad, err)
		}
	}
	// Nor can a client forge a decision through the session API.
	forged := map[string]any{"chunks": []map[string]any{{"kind": "approval", "payload": map[string]any{
		"call_id": "sh1", "tool": "run_shell_command", "decision": "approved"}}}}
	if err := s.cl.Do(ctx, "POST", "/v1/sessions/"+step.Output.String()+"/append", forged, nil); !isStatus(err, http.StatusBadRequest) ||
		!strings.Contains(err.Error(), "chunks[0].kind") {
		t.Errorf("appending an approval chunk: %v, want 400 naming chunks[0].kind", err)
	}
	if _, err := s.dev.Backend.Store.GetByKey(ctx, step.ID+"/approval/1"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("a refused decision recorded a version: %v", err)
	}

	res, err := s.decide(t, r.ID, api.ApprovalRequest{Decision: "approve", CallID: "sh1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Decided) != 1 || res.Decided[0].Tool != "run_shell_command" || res.Decided[0].By == "" || res.Continuation == nil ||
		res.Continuation.ID != runs.ContinuationID(step.ID) {
		t.Fatalf("decision = %+v", res)
	}
	r = s.waitRun(t, r.ID)
	if r.Status != runs.RunSucceeded || executions(t, marker) != 1 {
		t.Fatalf("run %s (%s), %d executions; want succeeded, 1", r.Status, r.Error, executions(t, marker))
	}
	// Deciding again: idempotent for the same call, 409 for the run.
	if _, err := s.decide(t, r.ID, api.ApprovalRequest{Decision: "approve", CallID: "sh1"}); !isStatus(err, http.StatusConflict) {
		t.Fatalf("decision on an ended run: %v, want 409", err)
	}

	out, err := session.Open(ctx, s.dev.Backend.Store, *r.Output)
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := out.Chunks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, c := range chunks {
		kinds = append(kinds, string(c.Kind()))
	}
	want := []string{"user", "assistant", "approval", "tool_result", "tool_result", "assistant"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("transcript %v, want %v", kinds, want)
	}
	d, err := agent.ParseApproval(chunks[2])
	if err != nil || d.CallID != "sh1" || !d.Approved() {
		t.Fatalf("approval chunk %+v, %v", d, err)
	}
	if tr, _ := chunks[4].ToolResult(); tr.ToolCallID != "sh1" || strings.Contains(tr.Content, `"ok":false`) {
		t.Fatalf("shell result = %+v", tr)
	}
	// The run's whole event history, from the bus.
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	ch, _, err := s.dev.Backend.Bus.WatchRun(wctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	events = nil
	for e := range ch {
		events = append(events, e.Type)
		if e.Type == "run.completed" {
			break
		}
	}
	i, j := slices.Index(events, "run.waiting"), slices.Index(events, "approval.decided")
	if i < 0 || j < i || !slices.Contains(events[j:], "step.continued") || events[len(events)-1] != "run.completed" {
		t.Fatalf("events = %v, want run.waiting, then approval.decided, step.continued, …, run.completed", events)
	}
}

// TestApprovalReject: a rejected call never runs; the model is answered
// with a rejected error body carrying the reason, and the run succeeds.
func TestApprovalReject(t *testing.T) {
	t.Parallel()
	s := startDev(t, "", app.DevConfig{Workers: 1})
	ctx := context.Background()
	marker := markerPath(t)
	r := s.submit(t, gatedSpec(marker), "Ship it.")
	r = s.waitStatus(t, r.ID, runs.RunWaiting)
	if _, err := s.decide(t, r.ID, api.ApprovalRequest{Decision: "reject", Reason: "change freeze"}); err != nil {
		t.Fatal(err)
	}
	r = s.waitRun(t, r.ID)
	if r.Status != runs.RunSucceeded || executions(t, marker) != 0 {
		t.Fatalf("run %s (%s), %d executions; want succeeded, 0", r.Status, r.Error, executions(t, marker))
	}
	out, err := session.Open(ctx, s.dev.Backend.Store, *r.Output)
	if err != nil {
		t.Fatal(err)
	}
	var body string
	for _, c := range out.Version().Chunks {
		if tr, ok := c.ToolResult(); ok && tr.ToolCallID == "sh1" {
			body = tr.Content
		}
	}
	if !strings.Contains(body, `"error_kind":"rejected"`) || !strings.Contains(body, "change freeze") {
		t.Fatalf("rejected call's body = %s", body)
	}
}

func isStatus(err error, code int) bool {
	var he *client.APIError
	return errors.As(err, &he) && he.Status == code
}

// TestApprovalInClientWorkflow: a client-driven workflow's agent step
// waits for approval; the driver reading the step sees it unfinished until
// the decision, then the continuation's output, never the waiting version.
func TestApprovalInClientWorkflow(t *testing.T) {
	t.Parallel()
	s := startDev(t, "", app.DevConfig{Workers: 1})
	ctx := context.Background()
	marker := markerPath(t)
	run, err := s.cl.StartWorkflow(ctx, client.WorkflowRequest{Message: "Ship it."})
	if err != nil {
		t.Fatal(err)
	}
	call := `{"kind":"agent","agent":` + gatedSpec(marker) + `}`
	if _, err := s.cl.PutStep(ctx, run.ID, "deploy", json.RawMessage(call), run.Input); err != nil {
		t.Fatal(err)
	}
	s.waitStatus(t, run.ID, runs.RunWaiting)
	st, err := s.cl.GetStep(ctx, run.ID, "deploy", 0)
	if err != nil || st.Status != runs.StepWaiting || executions(t, marker) != 0 {
		t.Fatalf("step while waiting: %+v, %v, %d executions", st, err, executions(t, marker))
	}
	waitingVersion := st.Output
	if _, err := s.decide(t, run.ID, api.ApprovalRequest{Decision: "approve"}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the step to finish", func() bool {
		st, err = s.cl.GetStep(ctx, run.ID, "deploy", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return st.Status == runs.StepCommitted
	})
	if st.Output == nil || waitingVersion == nil || *st.Output == *waitingVersion || executions(t, marker) != 1 {
		t.Fatalf("finished step %+v (waiting version %v), %d executions", st, waitingVersion, executions(t, marker))
	}
	outID := *st.Output
	out, err := session.Open(ctx, s.dev.Backend.Store, outID)
	if err != nil {
		t.Fatal(err)
	}
	if cs := out.Version().Chunks; cs[len(cs)-1].Text() != "Done." {
		t.Fatalf("the driver got %v, want the continuation's answer", cs)
	}
}
