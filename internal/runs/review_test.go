package runs_test

import (
	"context"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/runs"
)

// TestListShowsNeedsReview: List derives needs_review for a waiting run
// whose step stopped on an ambiguous call no review has decided (the
// store keeps the run waiting), filters on it, and tells it apart from a
// run waiting for an approval; a decided review makes the run running
// again. Same on SQLite and Postgres.
func TestListShowsNeedsReview(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, url string) {
		ctx := context.Background()
		rs := open(t, url)
		start := func(r runs.Run) string {
			t.Helper()
			if _, err := rs.StartStep(ctx, r.Steps[0].ID, "w1"); err != nil {
				t.Fatal(err)
			}
			return r.Steps[0].ID
		}
		running := newRun(t, rs, url)
		start(running)
		approval := newRun(t, rs, url)
		if _, err := rs.WaitStep(ctx, start(approval), version(t, url)); err != nil {
			t.Fatal(err)
		}
		review := newRun(t, rs, url)
		reviewStep := start(review)
		if _, err := rs.NeedsReview(ctx, reviewStep, 2, "call-1", "w1", []byte(`{"tool":"send"}`)); err != nil {
			t.Fatal(err)
		}
		decided := newRun(t, rs, url)
		decidedStep := start(decided)
		if _, err := rs.NeedsReview(ctx, decidedStep, 1, "call-9", "w1", []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := rs.Review(ctx, decidedStep, 1, "call-9", "alice", []byte(`{"decision":"retry"}`)); err != nil {
			t.Fatal(err)
		}

		list := func(st runs.RunStatus) string {
			t.Helper()
			got, err := rs.List(ctx, runs.ListParams{Status: st})
			if err != nil {
				t.Fatalf("list %q: %v", st, err)
			}
			names := map[string]string{running.ID: "running", approval.ID: "approval", review.ID: "review", decided.ID: "decided"}
			var out []string
			for _, r := range got {
				out = append(out, names[r.ID]+"="+string(r.Status))
			}
			return strings.Join(out, " ")
		}
		for _, c := range []struct {
			status runs.RunStatus
			want   string
		}{
			{"", "decided=running review=needs_review approval=waiting running=running"},
			{runs.RunNeedsReview, "review=needs_review"},
			{runs.RunWaiting, "approval=waiting"},
			{runs.RunRunning, "decided=running running=running"},
			{runs.RunFailed, ""},
		} {
			if got := list(c.status); got != c.want {
				t.Errorf("list %q = %q, want %q", c.status, got, c.want)
			}
		}
		if got, err := rs.List(ctx, runs.ListParams{Status: runs.RunNeedsReview, Before: review.ID}); err != nil || len(got) != 0 {
			t.Errorf("needs_review runs before the only one: %+v, %v", got, err)
		}
		// The store keeps the run waiting: Get is the stored state (the
		// API derives needs_review there with PendingReviews).
		if r, err := rs.Get(ctx, review.ID); err != nil || r.Status != runs.RunWaiting {
			t.Errorf("Get of the needs_review run: %s, %v; want waiting", r.Status, err)
		}
	})
}
