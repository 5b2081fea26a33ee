package runs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/testenv"
)

// TestStartsGroupedDecideAsAlone: step starts that arrive while one is in
// flight go as one statement (they share its transaction), and each
// decides what it would alone: a pending step starts and its run runs
// (once for a run of two steps); an ended step, a waiting one and one of
// a run past its deadline take the general path and end ErrTerminal. A
// group that would start one step twice goes one start at a time.
func TestStartsGroupedDecideAsAlone(t *testing.T) {
	ctx := context.Background()
	s, db, conn, input := openRunStore(t)
	newRun := func(steps int, deadline *time.Time) Run { return createRun(t, s, input, steps, deadline) }

	// hold starts as many steps as a store has start statements in flight,
	// with their rows locked by another transaction, so the starts called
	// meanwhile queue; it returns a function that releases the locks once
	// they have all queued.
	hold := func(n int) (release func()) {
		t.Helper()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, groupsInFlight)
		for range groupsInFlight {
			blocker := newRun(1, nil)
			if _, err := tx.Exec(ctx, `SELECT 1 FROM steps WHERE id = $1 FOR UPDATE`, blocker.Steps[0].ID); err != nil {
				t.Fatal(err)
			}
			go func() { _, err := s.StartStep(ctx, blocker.Steps[0].ID, "w"); done <- err }()
		}
		// The blockers' starts are in flight (waiting for their rows)
		// before any other start is called: the others queue behind them.
		waitLockWaiters(t, db, "the held starts to wait for their rows", groupsInFlight)
		return func() {
			t.Helper()
			waitUntil(t, "the starts to queue", func() (bool, string) {
				s.starts.mu.Lock()
				queued := len(s.starts.queue)
				s.starts.mu.Unlock()
				return queued == n, fmt.Sprintf("%d queued, want %d", queued, n)
			})
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			for range groupsInFlight {
				if err := <-done; err != nil {
					t.Fatalf("a held start: %v", err)
				}
			}
		}
	}
	startAll := func(ids []string) ([]Step, []error) {
		sts, errs := make([]Step, len(ids)), make([]error, len(ids))
		release := hold(len(ids))
		var wg sync.WaitGroup
		for i, id := range ids {
			wg.Go(func() { sts[i], errs[i] = s.StartStep(ctx, id, "w") })
		}
		release()
		wg.Wait()
		return sts, errs
	}

	plain, pair := newRun(1, nil), newRun(2, nil)
	ended := newRun(1, nil)
	if _, err := s.StartStep(ctx, ended.Steps[0].ID, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CommitStep(ctx, ended.Steps[0].ID, input); err != nil {
		t.Fatal(err)
	}
	waiting := newRun(1, nil)
	if _, err := s.StartStep(ctx, waiting.Steps[0].ID, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WaitStep(ctx, waiting.Steps[0].ID, input); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Second)
	late := newRun(1, &past)

	ids := []string{plain.Steps[0].ID, pair.Steps[0].ID, pair.Steps[1].ID, ended.Steps[0].ID, waiting.Steps[0].ID, late.Steps[0].ID}
	sts, errs := startAll(ids)
	for i := range 3 {
		if errs[i] != nil || sts[i].Status != StepRunning || sts[i].Attempts != 1 || sts[i].ID != ids[i] || sts[i].Worker != "w" || !sts[i].EpochKnown {
			t.Errorf("start of %s = %+v, %v; want running, attempt 1, the epoch read", ids[i], sts[i], errs[i])
		}
	}
	for i := 3; i < len(ids); i++ {
		if !errors.Is(errs[i], ErrTerminal) {
			t.Errorf("start of %s: %v, want ErrTerminal", ids[i], errs[i])
		}
	}
	var xmins int
	if err := conn.QueryRow(ctx, `SELECT count(DISTINCT xmin::text) FROM steps WHERE id = ANY($1)`, ids[:3]).Scan(&xmins); err != nil || xmins != 1 {
		t.Errorf("the three started steps were written by %d transactions (%v), want 1: one statement", xmins, err)
	}
	for _, c := range []struct {
		id   string
		want RunStatus
	}{{plain.ID, RunRunning}, {pair.ID, RunRunning}, {ended.ID, RunSucceeded}, {waiting.ID, RunWaiting}, {late.ID, RunTimedOut}} {
		if r, err := s.Get(ctx, c.id); err != nil || r.Status != c.want {
			t.Errorf("run %s = %s, %v; want %s", c.id, r.Status, err, c.want)
		}
	}

	// The same step twice in one group (a redelivery racing the first
	// delivery): both start, one after the other, as they would alone.
	twice := newRun(1, nil)
	sts, errs = startAll([]string{twice.Steps[0].ID, twice.Steps[0].ID})
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("starts of one step twice: %v, %v", errs[0], errs[1])
	}
	if a, b := sts[0].Attempts, sts[1].Attempts; a+b != 3 {
		t.Errorf("starts of one step twice saw attempts %d and %d, want 1 and 2", a, b)
	}
}

// waitUntil polls cond until it holds, failing the test after 10 s and
// logging cond's last word.
func waitUntil(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	defer func() {
		if t.Failed() {
			t.Logf("waiting for %s: last seen %s", what, last)
		}
	}()
	testenv.Eventually(t, 10*time.Second, what, func() bool {
		ok, l := cond()
		last = l
		return ok
	})
}

// waitLockWaiters waits until n backends of the test database wait for a
// row lock.
func waitLockWaiters(t *testing.T, db *sql.DB, what string, n int) {
	t.Helper()
	waitUntil(t, what, func() (bool, string) {
		var waiting int
		err := db.QueryRowContext(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
		return err == nil && waiting == n, fmt.Sprintf("%d waiting, %v", waiting, err)
	})
}

// TestStartHeldUpHoldsNoOtherStart: a step start held up (its row locked
// by another transaction, as a stuck commit or an operator's session
// would) does not hold the process's other starts behind it: they go on
// the store's other statement in flight. With one statement in flight
// they all waited for the held one.
func TestStartHeldUpHoldsNoOtherStart(t *testing.T) {
	ctx := context.Background()
	s, db, conn, input := openRunStore(t)
	var ids []string
	for range 4 {
		ids = append(ids, createRun(t, s, input, 1, nil).Steps[0].ID)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM steps WHERE id = $1 FOR UPDATE`, ids[0]); err != nil {
		t.Fatal(err)
	}
	held := make(chan error, 1)
	go func() { _, err := s.StartStep(ctx, ids[0], "w"); held <- err }()
	waitLockWaiters(t, db, "the held start to wait for its row", 1)
	for _, id := range ids[1:] {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		st, err := s.StartStep(sctx, id, "w")
		cancel()
		if err != nil || st.Status != StepRunning {
			t.Fatalf("start of %s while another is held up: %+v, %v", id, st, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-held; err != nil {
		t.Fatalf("the held start: %v", err)
	}
}
