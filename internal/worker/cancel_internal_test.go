package worker

import (
	"context"
	"errors"
	"testing"

	"github.com/rath-run/rath/internal/runs"
)

// inflight aborts exactly the steps of the named run that are still
// tracked, with a cause that is runs.ErrTerminal, and forgets untracked
// ones (no growth).
func TestInflightAbortsOnlyThatRun(t *testing.T) {
	var f inflight
	if n := f.abortRun("nobody"); n != 0 {
		t.Fatalf("zero value aborted %d", n)
	}
	a1, abort1 := context.WithCancelCause(context.Background())
	a2, abort2 := context.WithCancelCause(context.Background())
	b1, abortB := context.WithCancelCause(context.Background())
	done, abortDone := context.WithCancelCause(context.Background())
	defer abort1(nil)
	defer abort2(nil)
	defer abortB(nil)
	defer abortDone(nil)
	untrack1 := f.track("run-a", abort1)
	untrack2 := f.track("run-a", abort2)
	untrackB := f.track("run-b", abortB)
	f.track("run-a", abortDone)() // a step that ended before the event

	if n := f.abortRun("run-a"); n != 2 {
		t.Fatalf("aborted %d steps of run-a, want 2", n)
	}
	for i, ctx := range []context.Context{a1, a2} {
		if !errors.Is(context.Cause(ctx), runs.ErrTerminal) {
			t.Errorf("step %d of run-a: cause %v, want runs.ErrTerminal", i, context.Cause(ctx))
		}
	}
	if b1.Err() != nil || done.Err() != nil {
		t.Errorf("run-b's step (%v) or the untracked step (%v) was aborted", b1.Err(), done.Err())
	}
	untrack1()
	untrack2()
	untrackB()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.byRun) != 0 {
		t.Errorf("%d runs still tracked after every step ended", len(f.byRun))
	}
}
