package runs_test

import (
	"context"
	"errors"
	"testing"

	"github.com/rath-run/rath/internal/runs"
)

func TestContinuationID(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"run_x/0":        "run_x/0/c1",
		"run_x/0/c1":     "run_x/0/c2",
		"run_x/0/c9":     "run_x/0/c10",
		"run_x/a.1/c":    "run_x/a.1/c/c1",
		"run_x/c01":      "run_x/c01/c1",
		"run_x/calendar": "run_x/calendar/c1",
	} {
		if got := runs.ContinuationID(in); got != want {
			t.Errorf("ContinuationID(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestWaitAndContinue walks a step through wait, a refused restart (a
// redelivered job of a waiting step), continue and the continuation's
// commit, which settles the run with the continuation's output.
func TestWaitAndContinue(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, url string) {
		ctx := context.Background()
		rs := open(t, url)
		r := newRun(t, rs, url)
		step := r.Steps[0]
		if _, err := rs.StartStep(ctx, step.ID, "w1"); err != nil {
			t.Fatal(err)
		}
		waiting := version(t, url)
		got, err := rs.WaitStep(ctx, step.ID, waiting)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != runs.RunWaiting {
			t.Fatalf("run status = %s, want waiting", got.Status)
		}
		if _, err := rs.WaitStep(ctx, step.ID, waiting); err != nil {
			t.Fatalf("second WaitStep: %v", err)
		}
		st, err := rs.StartStep(ctx, step.ID, "w2")
		if !errors.Is(err, runs.ErrTerminal) || st.Status != runs.StepWaiting {
			t.Fatalf("StartStep of a waiting step: %v, status %s; want ErrTerminal, waiting", err, st.Status)
		}
		stale, err := rs.Stale(ctx, st.UpdatedAt.Add(1e12), 10)
		if err != nil || len(stale) != 0 {
			t.Fatalf("stale = %v, %v; a waiting step is never republished", stale, err)
		}
		ws, err := rs.WaitingSteps(ctx, r.ID)
		if err != nil || len(ws) != 1 || ws[0].ID != step.ID || ws[0].Output == nil || *ws[0].Output != waiting {
			t.Fatalf("waiting steps = %+v, %v", ws, err)
		}

		head := version(t, url)
		cont, created, err := rs.Continue(ctx, step.ID, head)
		if err != nil || !created {
			t.Fatalf("Continue: %v, created %v", err, created)
		}
		if cont.ID != runs.ContinuationID(step.ID) || cont.Input != head || cont.Status != runs.StepPending || cont.Ordinal != 1 {
			t.Fatalf("continuation = %+v", cont)
		}
		again, created, err := rs.Continue(ctx, step.ID, head)
		if err != nil || created || again.ID != cont.ID {
			t.Fatalf("second Continue: %+v, %v, %v", again, created, err)
		}
		run, err := rs.Get(ctx, r.ID)
		if err != nil || run.Status != runs.RunRunning || run.Steps[0].Status != runs.StepCommitted || *run.Steps[0].Output != waiting {
			t.Fatalf("after Continue: %+v, %v", run, err)
		}
		if _, err := rs.StartStep(ctx, cont.ID, "w1"); err != nil {
			t.Fatal(err)
		}
		out := version(t, url)
		done, err := rs.CommitStep(ctx, cont.ID, out)
		if err != nil || done.Status != runs.RunSucceeded || done.Output == nil || *done.Output != out {
			t.Fatalf("after the continuation's commit: %+v, %v", done, err)
		}
		final, err := rs.Final(ctx, step.ID)
		if err != nil || final.ID != cont.ID {
			t.Fatalf("Final = %+v, %v", final, err)
		}
	})
}

func TestContinueRefusesStepsNotWaiting(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, url string) {
		ctx := context.Background()
		rs := open(t, url)
		r := newRun(t, rs, url)
		if _, _, err := rs.Continue(ctx, r.Steps[0].ID, r.Input); !errors.Is(err, runs.ErrNotWaiting) {
			t.Fatalf("Continue of a pending step: %v, want ErrNotWaiting", err)
		}
		if _, err := rs.StartStep(ctx, r.Steps[0].ID, "w"); err != nil {
			t.Fatal(err)
		}
		if _, err := rs.WaitStep(ctx, r.Steps[0].ID, r.Input); err != nil {
			t.Fatal(err)
		}
		if _, err := rs.Cancel(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		if _, _, err := rs.Continue(ctx, r.Steps[0].ID, r.Input); !errors.Is(err, runs.ErrNotWaiting) {
			t.Fatalf("Continue after cancel: %v, want ErrNotWaiting", err)
		}
		if _, err := rs.WaitStep(ctx, r.Steps[0].ID, r.Input); !errors.Is(err, runs.ErrTerminal) {
			t.Fatalf("WaitStep of a canceled step: %v, want ErrTerminal", err)
		}
	})
}
