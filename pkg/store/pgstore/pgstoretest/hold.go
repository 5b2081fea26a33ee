// Package pgstoretest holds test helpers for code that commits through a
// [pgstore.Store].
package pgstoretest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/pgstore"
	"github.com/rath-run/rath/pkg/store/storetest"
)

// holdLock is the advisory lock a held group waits for.
const holdLock = 7

// HoldGroup holds one commit group in flight on st, which must hold no
// other group that waits for the lock, and be opened with GroupCommit 1
// or its group's stall time set past the test's (pgstore's SetStall): it
// commits a version extending from (give it a session no commit to come
// extends, so that it takes no lane one of them wants) with a statement
// that waits for an advisory lock, and returns once that statement waits.
// Commits made from then on queue behind it. release lets the held group
// go, so that the commits queued meanwhile go as the next group, and fails
// t when the held commit failed.
func HoldGroup(t testing.TB, st *pgstore.Store, from session.Session) (release func()) {
	t.Helper()
	ctx := context.Background()
	pool := st.Pool()
	lock, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lock.Release)
	if _, err := lock.Exec(ctx, `SELECT pg_advisory_lock($1)`, holdLock); err != nil {
		t.Fatal(err)
	}
	held := make(chan error, 1)
	v := storetest.Prepare(t, from, "hold-"+uuid.NewString(), session.Assistant("held"))
	go func() {
		_, ran, err := st.PutWith(ctx, v, pgstore.Stmt{SQL: `SELECT pg_advisory_xact_lock_shared($1)`, Args: []any{holdLock}})
		if err == nil && !ran {
			err = errors.New("its statement did not run")
		}
		held <- err
	}()
	testenv.Eventually(t, 10*time.Second, "the held commit to wait for the lock", func() bool {
		select {
		case err := <-held:
			t.Fatalf("held commit did not wait: %v", err)
		default:
		}
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'advisory'`).Scan(&n)
		return err == nil && n == 1
	})
	return func() {
		t.Helper()
		if _, err := lock.Exec(ctx, `SELECT pg_advisory_unlock($1)`, holdLock); err != nil {
			t.Fatal(err)
		}
		if err := <-held; err != nil {
			t.Fatalf("held commit: %v", err)
		}
	}
}
