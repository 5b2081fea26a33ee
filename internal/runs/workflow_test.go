package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/runs"
)

func newWorkflowRun(t *testing.T, rs *runs.Store, url string, deadline *time.Time) runs.Run {
	t.Helper()
	r := runs.Run{ID: runs.NewRunID(), Kind: runs.KindWorkflow, Driver: runs.DriverClient, Queue: "default",
		Target: json.RawMessage(`{}`), Input: version(t, url), Deadline: deadline}
	if err := rs.Create(context.Background(), &r, nil); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestWorkflowSteps(t *testing.T) {
	backends(t, func(t *testing.T, url string) {
		ctx := context.Background()
		rs := open(t, url)
		r := newWorkflowRun(t, rs, url, nil)
		in := version(t, url)
		call := json.RawMessage(`{"kind":"agent","agent":{"name":"a"}}`)
		st, created, err := rs.PutStep(ctx, r.ID, "0.1", call, in, "")
		if err != nil || !created {
			t.Fatalf("PutStep = %+v, %v, %v", st, created, err)
		}
		if st.ID != r.ID+"/0.1" || st.Key != "0.1" || st.Status != runs.StepPending {
			t.Fatalf("step = %+v", st)
		}
		// Idempotent: the same key returns the stored step, even with
		// another input.
		again, created, err := rs.PutStep(ctx, r.ID, "0.1", call, version(t, url), "")
		if err != nil || created || again.ID != st.ID || again.Input != in {
			t.Fatalf("PutStep again = %+v, %v, %v", again, created, err)
		}
		if string(again.Target) != string(call) {
			t.Fatalf("target = %s", again.Target)
		}
		if _, _, err := rs.PutStep(ctx, r.ID, "bad key", call, in, ""); err == nil {
			t.Fatal("bad key accepted")
		}
		// Committing a workflow step does not settle the run.
		if _, err := rs.StartStep(ctx, st.ID, "w1"); err != nil {
			t.Fatal(err)
		}
		out := version(t, url)
		got, err := rs.CommitStep(ctx, st.ID, out)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != runs.RunRunning {
			t.Fatalf("run after its only step committed = %s, want running (the driver ends it)", got.Status)
		}
		// A failed step does not fail a workflow run either.
		st2, _, err := rs.PutStep(ctx, r.ID, "0.2", call, out, "")
		if err != nil {
			t.Fatal(err)
		}
		if got, err = rs.FailStep(ctx, st2.ID, "boom"); err != nil || got.Status != runs.RunRunning {
			t.Fatalf("FailStep: run %s, %v", got.Status, err)
		}
		done, err := rs.Complete(ctx, r.ID, out)
		if err != nil || done.Status != runs.RunSucceeded || *done.Output != out {
			t.Fatalf("Complete = %+v, %v", done, err)
		}
		if _, err := rs.Complete(ctx, r.ID, out); err != nil {
			t.Fatalf("Complete again: %v", err)
		}
		if _, _, err := rs.PutStep(ctx, r.ID, "0.3", call, out, ""); !errors.Is(err, runs.ErrTerminal) {
			t.Fatalf("step on an ended run: %v", err)
		}
		// Agent runs take no keyed steps.
		a := runs.Run{ID: runs.NewRunID(), Queue: "default", Target: json.RawMessage(`{}`), Input: in}
		if err := rs.Create(ctx, &a, []runs.Step{{Input: in}}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := rs.PutStep(ctx, a.ID, "x", call, in, ""); !errors.Is(err, runs.ErrNotWorkflow) {
			t.Fatalf("step on an agent run: %v", err)
		}
	})
}

// TestCompleteCancelsOpenSteps: a workflow's driver may complete its run
// while steps it started are still open (it returned without waiting for
// them); the run's end cancels them, as a cancel, a failure or a deadline
// does, so a worker running one aborts at its next heartbeat and nothing
// of an ended run stays open.
func TestCompleteCancelsOpenSteps(t *testing.T) {
	backends(t, func(t *testing.T, url string) {
		ctx := context.Background()
		rs := open(t, url)
		r := newWorkflowRun(t, rs, url, nil)
		call := json.RawMessage(`{"kind":"agent","agent":{"name":"a"}}`)
		put := func(key string) runs.Step {
			t.Helper()
			st, _, err := rs.PutStep(ctx, r.ID, key, call, r.Input, "")
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
		won, running, pending := put("0.1"), put("0.2"), put("0.3")
		for _, st := range []runs.Step{won, running} {
			if _, err := rs.StartStep(ctx, st.ID, "w1"); err != nil {
				t.Fatal(err)
			}
		}
		out := version(t, url)
		if _, err := rs.CommitStep(ctx, won.ID, out); err != nil {
			t.Fatal(err)
		}
		done, err := rs.Complete(ctx, r.ID, out)
		if err != nil || done.Status != runs.RunSucceeded {
			t.Fatalf("Complete = %+v, %v", done, err)
		}
		want := map[string]runs.StepStatus{won.ID: runs.StepCommitted, running.ID: runs.StepCanceled, pending.ID: runs.StepCanceled}
		for _, st := range done.Steps {
			if st.Status != want[st.ID] {
				t.Errorf("step %s = %s, want %s", st.ID, st.Status, want[st.ID])
			}
			if st.Status == runs.StepCanceled && st.FinishedAt == nil {
				t.Errorf("canceled step %s has no finish time", st.ID)
			}
		}
		if len(done.Steps) != len(want) {
			t.Fatalf("steps = %+v", done.Steps)
		}
		if err := rs.Touch(ctx, running.ID); !errors.Is(err, runs.ErrTerminal) {
			t.Fatalf("heartbeat of a step of the completed run = %v, want ErrTerminal", err)
		}
		// Completing again is still a no-op, and leaves the output.
		again, err := rs.Complete(ctx, r.ID, out)
		if err != nil || again.Output == nil || *again.Output != out {
			t.Fatalf("Complete again = %+v, %v", again, err)
		}
	})
}

func TestCancelReachesHeartbeat(t *testing.T) {
	backends(t, func(t *testing.T, url string) {
		ctx := context.Background()
		rs := open(t, url)
		r := newWorkflowRun(t, rs, url, nil)
		st, _, err := rs.PutStep(ctx, r.ID, "k", json.RawMessage(`{}`), r.Input, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rs.StartStep(ctx, st.ID, "w"); err != nil {
			t.Fatal(err)
		}
		if err := rs.Touch(ctx, st.ID); err != nil {
			t.Fatalf("touch running: %v", err)
		}
		if _, err := rs.Cancel(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		if err := rs.Touch(ctx, st.ID); !errors.Is(err, runs.ErrTerminal) || errors.Is(err, runs.ErrCommitted) {
			t.Fatalf("touch after cancel = %v, want ErrTerminal and not ErrCommitted", err)
		}
		got, _ := rs.GetStep(ctx, st.ID)
		if got.Status != runs.StepCanceled {
			t.Fatalf("step = %s", got.Status)
		}
		// A late commit does not resurrect a canceled step.
		if _, err := rs.CommitStep(ctx, st.ID, version(t, url)); err != nil {
			t.Fatal(err)
		}
		if got, _ = rs.GetStep(ctx, st.ID); got.Status != runs.StepCanceled {
			t.Fatalf("step after a late commit = %s", got.Status)
		}
	})
}

func TestDeadline(t *testing.T) {
	backends(t, func(t *testing.T, url string) {
		ctx := context.Background()
		rs := open(t, url)
		past := time.Now().Add(-time.Second)
		r := newWorkflowRun(t, rs, url, &past)
		future := time.Now().Add(time.Hour)
		keep := newWorkflowRun(t, rs, url, &future)
		st, _, err := rs.PutStep(ctx, r.ID, "k", json.RawMessage(`{}`), r.Input, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rs.StartStep(ctx, st.ID, "w"); !errors.Is(err, runs.ErrTerminal) {
			t.Fatalf("StartStep past the deadline = %v", err)
		}
		got, _ := rs.Get(ctx, r.ID)
		if got.Status != runs.RunTimedOut || got.Steps[0].Status != runs.StepCanceled {
			t.Fatalf("run %s, step %s", got.Status, got.Steps[0].Status)
		}
		r2 := newWorkflowRun(t, rs, url, &past)
		ended, err := rs.Expire(ctx, time.Now(), 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(ended) != 1 || ended[0].ID != r2.ID || ended[0].Status != runs.RunTimedOut {
			t.Fatalf("Expire = %+v", ended)
		}
		if k, _ := rs.Get(ctx, keep.ID); k.Status != runs.RunPending || k.Deadline == nil {
			t.Fatalf("run with a future deadline: %+v", k)
		}
		driven, err := rs.Driven(ctx, runs.DriverClient, 10)
		if err != nil || len(driven) != 1 || driven[0].ID != keep.ID {
			t.Fatalf("Driven = %+v, %v", driven, err)
		}
	})
}

// TestStepDigestAndAcceptChanges: a step keeps the digest it was put with
// (a second put does not replace it), and accepting changes sets the
// run's ChangesAcceptedAt, reopening a run whose failure reopenable names
// and refusing any other ended run.
func TestStepDigestAndAcceptChanges(t *testing.T) {
	backends(t, func(t *testing.T, url string) {
		ctx := context.Background()
		rs := open(t, url)
		r := newWorkflowRun(t, rs, url, nil)
		call := json.RawMessage(`{"kind":"agent","agent":{"name":"a"}}`)
		st, _, err := rs.PutStep(ctx, r.ID, "k", call, r.Input, "sha256:one")
		if err != nil || st.Digest != "sha256:one" {
			t.Fatalf("PutStep = %+v, %v", st, err)
		}
		again, created, err := rs.PutStep(ctx, r.ID, "k", call, r.Input, "sha256:two")
		if err != nil || created || again.Digest != "sha256:one" {
			t.Fatalf("PutStep again = %+v, %v, %v; want the recorded digest", again, created, err)
		}
		if got, _ := rs.GetStep(ctx, st.ID); got.Digest != "sha256:one" {
			t.Fatalf("stored digest = %q", got.Digest)
		}
		if got, _ := rs.Get(ctx, r.ID); got.ChangesAcceptedAt != nil {
			t.Fatalf("a new run has accepted changes at %v", got.ChangesAcceptedAt)
		}
		got, reopened, err := rs.AcceptChanges(ctx, r.ID, nil)
		if err != nil || reopened || got.ChangesAcceptedAt == nil || got.Status.Terminal() {
			t.Fatalf("AcceptChanges = %+v, %v, %v", got, reopened, err)
		}
		if _, err := rs.FailRun(ctx, r.ID, "step k: changed"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := rs.AcceptChanges(ctx, r.ID, func(string) bool { return false }); !errors.Is(err, runs.ErrTerminal) {
			t.Fatalf("AcceptChanges of a run failed otherwise = %v, want ErrTerminal", err)
		}
		got, reopened, err = rs.AcceptChanges(ctx, r.ID, func(reason string) bool { return reason == "step k: changed" })
		if err != nil || !reopened || got.Status != runs.RunRunning || got.Error != "" {
			t.Fatalf("AcceptChanges of a nondeterministic failure = %s %q, %v, %v; want running again", got.Status, got.Error, reopened, err)
		}
		if st, _ := rs.GetStep(ctx, st.ID); st.Status != runs.StepPending || st.FinishedAt != nil {
			t.Fatalf("the step the failure canceled = %s (finished %v), want pending again", st.Status, st.FinishedAt)
		}
		a := runs.Run{ID: runs.NewRunID(), Queue: "default", Target: json.RawMessage(`{}`), Input: r.Input}
		if err := rs.Create(ctx, &a, []runs.Step{{Input: r.Input}}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := rs.AcceptChanges(ctx, a.ID, nil); !errors.Is(err, runs.ErrNotWorkflow) {
			t.Fatalf("AcceptChanges of an agent run = %v", err)
		}
		if _, _, err := rs.AcceptChanges(ctx, "nope", nil); !errors.Is(err, runs.ErrNotFound) {
			t.Fatalf("AcceptChanges of no run = %v", err)
		}
	})
}
