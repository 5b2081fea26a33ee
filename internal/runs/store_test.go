package runs_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/store/storeurl"
)

// graphs holds the migrated Session Graph store of the test: runs and steps
// refer to its versions.
var graphs sync.Map // url → store.Store

// open migrates a store at url and opens the run store on it.
func open(t testing.TB, url string) *runs.Store {
	t.Helper()
	ctx := context.Background()
	st, err := storeurl.Open(ctx, url, storeurl.Options{Migrate: true, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	graphs.Store(url, st)
	rs, db, err := runs.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return rs
}

// version commits a new root version in the test's graph.
func version(t *testing.T, url string) session.ID {
	t.Helper()
	g, _ := graphs.Load(url)
	s, err := session.FromUserMessage(context.Background(), g.(store.Store), "hi")
	if err != nil {
		t.Fatal(err)
	}
	return s.ID()
}

func backends(t *testing.T, fn func(t *testing.T, url string)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, "sqlite:"+filepath.Join(t.TempDir(), "rath.db"))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, testdb.Postgres(t))
	})
}

// TestOpenPoolSettings: a store URL may carry pgxpool's pool_max_conns
// (it sizes the graph pool); the run store takes it too, where it used to
// send it to the server as a session parameter, which refused the
// connection ("unrecognized configuration parameter").
func TestOpenPoolSettings(t *testing.T) {
	t.Parallel()
	url := testdb.Postgres(t)
	open(t, url) // migrate
	_, db, err := runs.Open(context.Background(), url+"&pool_max_conns=3")
	if err != nil {
		t.Fatalf("runs.Open with pool_max_conns: %v", err)
	}
	defer db.Close()
	if got := db.Stats().MaxOpenConnections; got != 3 {
		t.Fatalf("MaxOpenConnections %d, want the URL's 3", got)
	}
}

func newRun(t *testing.T, rs *runs.Store, url string) runs.Run {
	t.Helper()
	in := version(t, url)
	r := runs.Run{ID: runs.NewRunID(), Queue: "default", Target: []byte(`{"name":"a"}`), Input: in}
	if err := rs.Create(context.Background(), &r, []runs.Step{{Input: in}}); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestStepLifecycle walks a step through start, restart, commit and the
// idempotent re-commit, checking that what StartStep returns is what the
// store holds.
func TestStepLifecycle(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, url string) {
		ctx := context.Background()
		rs := open(t, url)
		r := newRun(t, rs, url)
		if r.Status != runs.RunPending || len(r.Steps) != 1 || r.Steps[0].ID != runs.StepID(r.ID, 0) {
			t.Fatalf("created run = %+v", r)
		}
		stepID := r.Steps[0].ID

		st, err := rs.StartStep(ctx, stepID, "w1")
		if err != nil {
			t.Fatal(err)
		}
		stored, err := rs.GetStep(ctx, stepID)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status != runs.StepRunning || st.Attempts != 1 || st.Worker != "w1" || st.StartedAt == nil ||
			stored.Status != st.Status || stored.Attempts != st.Attempts || stored.Worker != st.Worker ||
			!stored.StartedAt.Equal(*st.StartedAt) || !stored.UpdatedAt.Equal(st.UpdatedAt) {
			t.Fatalf("StartStep returned %+v, store holds %+v", st, stored)
		}
		if got, _ := rs.Get(ctx, r.ID); got.Status != runs.RunRunning {
			t.Fatalf("run after start = %s, want running", got.Status)
		}
		first := *st.StartedAt
		st, err = rs.StartStep(ctx, stepID, "w2")
		if err != nil || st.Attempts != 2 || st.Worker != "w2" || !st.StartedAt.Equal(first) {
			t.Fatalf("second start = %+v, %v; want attempt 2 on w2, first start time kept", st, err)
		}

		out := version(t, url)
		done, err := rs.CommitStep(ctx, stepID, out)
		if err != nil || done.Status != runs.RunSucceeded || done.Output == nil || *done.Output != out {
			t.Fatalf("commit = %+v, %v; want the run succeeded with %s", done, err, out)
		}
		again, err := rs.CommitStep(ctx, stepID, version(t, url))
		if err != nil || again.Status != runs.RunSucceeded || *again.Output != out {
			t.Fatalf("re-commit = %+v, %v; want a no-op keeping %s", again, err, out)
		}
		if _, err := rs.StartStep(ctx, stepID, "w3"); !errors.Is(err, runs.ErrTerminal) {
			t.Fatalf("start after commit: %v, want ErrTerminal", err)
		}
		if _, err := rs.StartStep(ctx, "run_nope/0", "w1"); !errors.Is(err, runs.ErrNotFound) {
			t.Fatalf("start of unknown step: %v, want ErrNotFound", err)
		}
	})
}

func TestFailAndCancel(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, url string) {
		ctx := context.Background()
		rs := open(t, url)
		r := newRun(t, rs, url)
		failed, err := rs.FailStep(ctx, r.Steps[0].ID, "model said no")
		if err != nil || failed.Status != runs.RunFailed || failed.Steps[0].Status != runs.StepFailed || failed.Steps[0].Error != "model said no" {
			t.Fatalf("fail = %+v, %v", failed, err)
		}
		if _, err := rs.Cancel(ctx, r.ID); !errors.Is(err, runs.ErrTerminal) {
			t.Fatalf("cancel of a failed run: %v, want ErrTerminal", err)
		}
		r2 := newRun(t, rs, url)
		canceled, err := rs.Cancel(ctx, r2.ID)
		if err != nil || canceled.Status != runs.RunCanceled || canceled.Steps[0].Status != runs.StepCanceled {
			t.Fatalf("cancel = %+v, %v", canceled, err)
		}
		if _, err := rs.StartStep(ctx, r2.Steps[0].ID, "w"); !errors.Is(err, runs.ErrTerminal) {
			t.Fatalf("start of a canceled step: %v, want ErrTerminal", err)
		}
	})
}

func TestStaleAndTouch(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, url string) {
		ctx := context.Background()
		rs := open(t, url)
		r := newRun(t, rs, url)
		stale, err := rs.Stale(ctx, time.Now().Add(time.Second), 10)
		if err != nil || len(stale) != 1 || stale[0].ID != r.Steps[0].ID {
			t.Fatalf("stale = %+v, %v; want the new step", stale, err)
		}
		if err := rs.Touch(ctx, r.Steps[0].ID); err != nil {
			t.Fatal(err)
		}
		if stale, err = rs.Stale(ctx, time.Now().Add(-time.Minute), 10); err != nil || len(stale) != 0 {
			t.Fatalf("stale a minute ago = %+v, %v; want none", stale, err)
		}
		// A committed step: Touch says it ended, and that it committed (a
		// worker lets such a step finish instead of aborting it).
		if _, err := rs.StartStep(ctx, r.Steps[0].ID, "w"); err != nil {
			t.Fatal(err)
		}
		if _, err := rs.CommitStep(ctx, r.Steps[0].ID, r.Input); err != nil {
			t.Fatal(err)
		}
		if err := rs.Touch(ctx, r.Steps[0].ID); !errors.Is(err, runs.ErrTerminal) || !errors.Is(err, runs.ErrCommitted) {
			t.Fatalf("touch of a committed step = %v, want ErrTerminal and ErrCommitted", err)
		}
	})
}

// TestLease: one holder at a time; the lease passes on after it expires.
func TestLease(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, url string) {
		ctx := context.Background()
		open(t, url) // migrate
		var mu sync.Mutex
		now := time.Now()
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		_, db, err := runs.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		rs := runs.NewStore(db, clock)
		for _, c := range []struct {
			holder string
			want   bool
		}{{"a", true}, {"b", false}, {"a", true}} {
			got, err := rs.AcquireLease(ctx, "reconciler", c.holder, time.Minute)
			if err != nil || got != c.want {
				t.Fatalf("AcquireLease(%s) = %v, %v; want %v", c.holder, got, err, c.want)
			}
		}
		mu.Lock()
		now = now.Add(2 * time.Minute)
		mu.Unlock()
		if got, err := rs.AcquireLease(ctx, "reconciler", "b", time.Minute); err != nil || !got {
			t.Fatalf("AcquireLease(b) after expiry = %v, %v; want true", got, err)
		}
		// A release by another than the holder leaves the lease; the
		// holder's release hands it over before it expires.
		if err := rs.ReleaseLease(ctx, "reconciler", "a"); err != nil {
			t.Fatal(err)
		}
		if got, err := rs.AcquireLease(ctx, "reconciler", "a", time.Minute); err != nil || got {
			t.Fatalf("AcquireLease(a) after a's release of b's lease = %v, %v; want false", got, err)
		}
		if err := rs.ReleaseLease(ctx, "reconciler", "b"); err != nil {
			t.Fatal(err)
		}
		if got, err := rs.AcquireLease(ctx, "reconciler", "a", time.Minute); err != nil || !got {
			t.Fatalf("AcquireLease(a) after b's release = %v, %v; want true", got, err)
		}
	})
}
