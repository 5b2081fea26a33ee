package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/rath-run/rath/pkg/session"
)

// groupTestDB opens a writer on a fresh file with the tables the group
// commit tests write, and a reader on the same file.
func groupTestDB(t *testing.T) (w *sql.DB, gw *writer, r *sql.DB) {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "g.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	for _, q := range []string{
		`CREATE TABLE item (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`,
		`CREATE TABLE parent (id INTEGER PRIMARY KEY)`,
		`CREATE TABLE child (id INTEGER PRIMARY KEY, pid INTEGER NOT NULL REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)`,
	} {
		if _, err := s.writer.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	return s.writer, &s.group.w, s.readers
}

// begin starts a write transaction on db and runs q in it.
func begin(t *testing.T, db *sql.DB, q string) *sql.Tx {
	t.Helper()
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(q); err != nil {
		t.Fatal(err)
	}
	return tx
}

// member runs, in a goroutine, a write transaction of q ended by end,
// and reports how it went.
func member(db *sql.DB, q string, end func(*sql.Tx) error) <-chan error {
	done := make(chan error, 1)
	go func() {
		tx, err := db.BeginTx(context.Background(), nil)
		if err != nil {
			done <- err
			return
		}
		if _, err := tx.Exec(q); err != nil {
			_ = tx.Rollback()
			done <- err
			return
		}
		done <- end(tx)
	}()
	return done
}

// within returns what done delivers, failing the test if nothing comes
// in 10 s (a hang).
func within(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("no result in 10s: hung")
		return nil
	}
}

// commitWithin commits tx, failing the test if the Commit fails or does
// not return in 10 s; when names the situation.
func commitWithin(t *testing.T, tx *sql.Tx, when string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- tx.Commit() }()
	if err := within(t, done); err != nil {
		t.Fatalf("Commit %s: %v", when, err)
	}
}

// waitWaiting waits until n connections wait for the writer: it wakes
// each time a waiter joins the queue.
func waitWaiting(t *testing.T, w *writer, n int) {
	t.Helper()
	w.mu.Lock()
	if w.queued == nil {
		w.queued = make(chan struct{}, 1)
	}
	queued := w.queued
	w.mu.Unlock()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for w.waiters() != n {
		select {
		case <-queued:
		case <-deadline.C:
			t.Fatalf("waiting = %d, want %d", w.waiters(), n)
		}
	}
}

func count(t *testing.T, db *sql.DB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestGroupCommitConcurrent: many writers at once, some rolling back, some
// failing a statement, some giving up while they wait: exactly the
// transactions whose Commit returned nil are stored, and they shared
// commits.
func TestGroupCommitConcurrent(t *testing.T) {
	db, w, r := groupTestDB(t)
	const workers, each = 16, 60
	var mu sync.Mutex
	want := map[int]bool{}
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for i := range each {
				id := g*each + i
				ctx, cancel := context.WithCancel(context.Background())
				if rng.IntN(10) == 0 {
					// Give up soon, maybe while waiting for the writer.
					time.AfterFunc(time.Duration(rng.IntN(200))*time.Microsecond, cancel)
				}
				ok := func() bool {
					tx, err := db.BeginTx(ctx, nil)
					if err != nil {
						return false
					}
					insert := func() error {
						_, err := tx.ExecContext(ctx, `INSERT INTO item (id, v) VALUES ($1, 'x')`, id)
						return err
					}
					if rng.IntN(4) == 0 {
						// A statement the transaction prepares: database/sql
						// closes it after the transaction ends.
						insert = func() error {
							//nolint:sqlclosecheck // database/sql closes it when the transaction ends: what this exercises
							st, err := tx.PrepareContext(ctx, `INSERT INTO item (id, v) VALUES ($1, 'x')`)
							if err != nil {
								return err
							}
							_, err = st.ExecContext(ctx, id)
							return err
						}
					}
					if err := insert(); err != nil {
						_ = tx.Rollback()
						return false
					}
					switch rng.IntN(8) {
					case 0:
						_ = tx.Rollback()
						return false
					case 1:
						// A failed statement (the id is taken) undoes itself; the
						// member goes on and commits its first row.
						if _, err := tx.ExecContext(ctx, `INSERT INTO item (id, v) VALUES ($1, 'dup')`, id); err == nil {
							t.Errorf("duplicate id %d inserted", id)
						}
					}
					return tx.Commit() == nil
				}()
				cancel()
				if ok {
					mu.Lock()
					want[id] = true
					mu.Unlock()
				}
			}
		})
	}
	// And a statement prepared on the writer outside a transaction, run
	// and closed while the others write.
	wg.Go(func() {
		st, err := db.Prepare(`SELECT count(*) FROM item`)
		if err != nil {
			t.Error(err)
			return
		}
		defer func() {
			if err := st.Close(); err != nil {
				t.Error(err)
			}
		}()
		for range 200 {
			var n int
			if err := st.QueryRow().Scan(&n); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	rows, err := r.Query(`SELECT id, v FROM item`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[int]bool{}
	for rows.Next() {
		var id int
		var v string
		if err := rows.Scan(&id, &v); err != nil {
			t.Fatal(err)
		}
		if v != "x" {
			t.Errorf("item %d = %q, want x", id, v)
		}
		got[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for id := range want {
		if !got[id] {
			t.Errorf("item %d: committed, not stored", id)
		}
	}
	for id := range got {
		if !want[id] {
			t.Errorf("item %d: stored, but its commit failed", id)
		}
	}
	if len(want) == 0 {
		t.Fatal("nothing committed")
	}
	commits, grouped := w.commits.Load(), w.grouped.Load()
	t.Logf("%d transactions committed in %d commits", grouped, commits)
	if commits >= grouped {
		t.Errorf("%d commits for %d transactions: no commit was shared", commits, grouped)
	}
}

// TestGroupCommitFailsTogether: a group commits or fails as one. The first
// member leaves a deferred foreign key broken, so the group's COMMIT
// fails: both members hear it, and neither's rows are stored.
func TestGroupCommitFailsTogether(t *testing.T) {
	db, w, r := groupTestDB(t)
	ctx := context.Background()
	a := begin(t, db, `INSERT INTO child (id, pid) VALUES (1, 99)`)
	bErr := member(db, `INSERT INTO parent (id) VALUES (1)`, (*sql.Tx).Commit)
	waitWaiting(t, w, 1)
	aErr := a.Commit() // b waits: a leaves the commit to it
	if aErr == nil {
		t.Fatalf("first member's Commit = %v, want the group's failure", aErr)
	}
	if err := <-bErr; err == nil {
		t.Fatal("second member's Commit = nil, want the group's failure")
	}
	if n := count(t, r, `SELECT count(*) FROM child`) + count(t, r, `SELECT count(*) FROM parent`); n != 0 {
		t.Fatalf("%d rows stored from a failed group", n)
	}
	// The writer goes on.
	if _, err := db.ExecContext(ctx, `INSERT INTO item (id, v) VALUES (1, 'x')`); err != nil {
		t.Fatalf("write after a failed group: %v", err)
	}
}

// TestGroupCommitMemberRollback: a member that rolls back undoes its own
// rows only (to its savepoint); the member before it in the group
// commits, and so does the member after it, in the same group.
func TestGroupCommitMemberRollback(t *testing.T) {
	db, w, r := groupTestDB(t)
	a := begin(t, db, `INSERT INTO item (id, v) VALUES (1, 'a')`)
	bDone := member(db, `INSERT INTO item (id, v) VALUES (2, 'b')`, (*sql.Tx).Rollback)
	waitWaiting(t, w, 1)
	cDone := member(db, `INSERT INTO item (id, v) VALUES (3, 'c')`, (*sql.Tx).Commit)
	waitWaiting(t, w, 2)
	if err := a.Commit(); err != nil {
		t.Fatalf("first member's Commit: %v", err)
	}
	if err := <-bDone; err != nil {
		t.Fatalf("second member: %v", err)
	}
	if err := <-cDone; err != nil {
		t.Fatalf("third member, after the second's rollback: %v", err)
	}
	if got := count(t, r, `SELECT count(*) FROM item WHERE id IN (1, 3)`); got != 2 {
		t.Fatalf("%d of the committed members' rows are stored, want 2", got)
	}
	if got := count(t, r, `SELECT count(*) FROM item WHERE id = 2`); got != 0 {
		t.Fatal("the rolled back member's row is stored")
	}
	if c := w.commits.Load(); c != 1 {
		t.Fatalf("%d commits, want the group's one", c)
	}
}

// TestGroupCommitAloneAfterGroup: a statement outside a transaction, and a
// read-only transaction, run alone: the open group commits first, the
// statement is committed when it returns, and a read-only transaction's
// query_only does not reach the writes after it.
func TestGroupCommitAloneAfterGroup(t *testing.T) {
	db, w, r := groupTestDB(t)
	ctx := context.Background()
	a := begin(t, db, `INSERT INTO item (id, v) VALUES (1, 'a')`)
	execDone := make(chan error, 1)
	go func() {
		_, err := db.ExecContext(ctx, `INSERT INTO item (id, v) VALUES (2, 'b')`)
		execDone <- err
	}()
	waitWaiting(t, w, 1)
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-execDone; err != nil {
		t.Fatal(err)
	}
	if got := count(t, r, `SELECT count(*) FROM item`); got != 2 {
		t.Fatalf("%d items visible to a reader after both returned, want 2", got)
	}

	ro, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.ExecContext(ctx, `PRAGMA query_only = 1`); err != nil {
		t.Fatal(err)
	}
	if _, err := ro.ExecContext(ctx, `INSERT INTO item (id, v) VALUES (3, 'c')`); err == nil {
		t.Fatal("write in a query_only transaction succeeded")
	}
	if _, err := ro.ExecContext(ctx, `PRAGMA query_only = 0`); err != nil {
		t.Fatal(err)
	}
	if err := ro.Rollback(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := db.ExecContext(ctx, fmt.Sprintf(`INSERT INTO item (id, v) VALUES (%d, 'd')`, 10+i)); err != nil {
			t.Fatalf("write after a read-only transaction: %v", err)
		}
	}
}

// TestGroupCommitCanceledWait: a transaction that gives up waiting for
// the writer returns its context's error, and the holder then commits
// alone without waiting for it.
func TestGroupCommitCanceledWait(t *testing.T) {
	db, w, r := groupTestDB(t)
	ctx := context.Background()
	a := begin(t, db, `INSERT INTO item (id, v) VALUES (1, 'a')`)
	bctx, cancel := context.WithCancel(ctx)
	bErr := make(chan error, 1)
	go func() {
		_, err := db.BeginTx(bctx, nil)
		bErr <- err
	}()
	waitWaiting(t, w, 1)
	cancel()
	if err := <-bErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled BeginTx = %v, want context.Canceled", err)
	}
	commitWithin(t, a, "after the waiter gave up")
	if got := count(t, r, `SELECT count(*) FROM item`); got != 1 {
		t.Fatalf("%d items, want 1", got)
	}
}

// TestGroupCommitWaiterLeavesAtHandOff: a waiter that gives up just as
// the holder decides whether to leave the group open for it. The holder
// decides and hands over under one lock, so every Commit returns: before
// that, a waiter leaving between the holder's check and its release left
// the group open with nobody to commit it (found at ~9,000 iterations).
func TestGroupCommitWaiterLeavesAtHandOff(t *testing.T) {
	db, w, r := groupTestDB(t)
	const n = 3000
	for i := range n {
		a := begin(t, db, fmt.Sprintf(`INSERT INTO item (id, v) VALUES (%d, 'a')`, i))
		bctx, cancel := context.WithCancel(context.Background())
		bErr := make(chan error, 1)
		go func() {
			tx, err := db.BeginTx(bctx, nil)
			if err == nil {
				err = tx.Rollback()
			}
			bErr <- err
		}()
		for w.waiters() != 1 {
			runtime.Gosched()
		}
		done := make(chan error, 1)
		go func() { done <- a.Commit() }()
		for range i % 50 {
			runtime.Gosched()
		}
		cancel()
		if err := <-bErr; err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, sql.ErrTxDone) {
			t.Fatalf("iteration %d: the waiter: %v", i, err)
		}
		if err := within(t, done); err != nil {
			t.Fatalf("iteration %d: Commit: %v", i, err)
		}
	}
	if got := count(t, r, `SELECT count(*) FROM item`); got != n {
		t.Fatalf("%d items stored, want %d", got, n)
	}
}

// TestGroupCommitAfterSQLiteRolledBack: a statement that makes SQLite
// roll the whole transaction back (INSERT OR ROLLBACK here; a full disk or
// an I/O error does the same) is found at the member's end: the member is
// told its transaction failed, and the next writer is not carried into a
// transaction that no longer exists (it was told "failed" while its rows
// were committed).
func TestGroupCommitAfterSQLiteRolledBack(t *testing.T) {
	db, w, r := groupTestDB(t)
	a := begin(t, db, `INSERT INTO item (id, v) VALUES (1, 'a')`)
	if _, err := a.Exec(`INSERT OR ROLLBACK INTO item (id, v) VALUES (1, 'dup')`); err == nil {
		t.Fatal("duplicate insert succeeded")
	}
	bErr := member(db, `INSERT INTO item (id, v) VALUES (2, 'b')`, (*sql.Tx).Commit)
	waitWaiting(t, w, 1)
	if err := a.Commit(); err == nil {
		t.Fatal("Commit of a transaction SQLite rolled back = nil")
	}
	b := <-bErr
	stored := count(t, r, `SELECT count(*) FROM item WHERE id = 2`)
	if (b == nil) != (stored == 1) {
		t.Fatalf("second writer told %v, and its row stored: %v", b, stored == 1)
	}
	if got := count(t, r, `SELECT count(*) FROM item WHERE id = 1`); got != 0 {
		t.Fatal("the rolled back transaction's row is stored")
	}
}

// TestGroupCommitCloseWithPreparedTx: the store closes while a
// transaction that prepared a statement commits; database/sql closes the
// statement after the commit, when the connection may be closed: it must
// not be finalized on the closed connection (that crashed), and Close
// finalizes it first, or the connection was never freed (its files stayed
// open: 11 → 70 descriptors in 30 rounds).
func TestGroupCommitCloseWithPreparedTx(t *testing.T) {
	ctx := context.Background()
	fds := func() int {
		es, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(es)
	}
	round := func() {
		s, err := Open(ctx, filepath.Join(t.TempDir(), "g.db"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.writer.Exec(`CREATE TABLE item (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		tx, err := s.writer.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		st, err := tx.Prepare(`INSERT INTO item (id, v) VALUES (?, 'x')`) //nolint:sqlclosecheck // the transaction's end closes it: what this exercises
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Exec(1); err != nil {
			t.Fatal(err)
		}
		closed := make(chan error, 1)
		go func() { closed <- s.Close() }()
		waitWaiting(t, &s.group.w, 1) // Close waits for the transaction
		if err := tx.Commit(); err != nil {
			t.Fatalf("Commit: %v", err)
		}
		if err := <-closed; err != nil {
			t.Fatalf("Close: %v", err)
		}
		if _, err := s.writer.Exec(`INSERT INTO item (id, v) VALUES (2, 'x')`); err == nil {
			t.Fatal("write after Close succeeded")
		}
	}
	round()
	before := fds()
	for range 20 {
		round()
	}
	if after := fds(); after > before+5 {
		t.Fatalf("open files %d → %d after 20 stores closed: connections not freed", before, after)
	}
}

// TestGroupCommitBulkRunsAlone: a bulk import reads its client's upload
// inside its transaction, so it runs alone: a member that committed before
// it hears its commit without waiting for the import to end.
func TestGroupCommitBulkRunsAlone(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "g.db"), Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Exec(`CREATE TABLE item (id INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	upload := make(chan struct{})
	var uploaded sync.Once
	finish := func() { uploaded.Do(func() { close(upload) }) }
	defer finish() // before Close, which waits for the import
	bulkDone := make(chan error, 1)
	go func() {
		bulkDone <- s.Bulk(ctx, func(context.Context, session.BulkTx) error {
			<-upload // the client's upload, still coming
			return nil
		})
	}()
	waitWaiting(t, &s.group.w, 1)
	commitWithin(t, a, "with a bulk import waiting after it")
	finish()
	if err := <-bulkDone; err != nil {
		t.Fatal(err)
	}
}

// TestGroupCommitRefusesAfterSQLiteRolledBack: a caller that goes on
// after a statement on which SQLite rolled its whole transaction back
// (INSERT OR ROLLBACK, a full disk) must not have its later statements
// run outside any transaction, each committed at once while its Commit
// reports failure: they are refused, and nothing of the transaction is
// stored. A member that joins the group after it, and one that joined
// before it, are told the truth too.
func TestGroupCommitRefusesAfterSQLiteRolledBack(t *testing.T) {
	db, w, r := groupTestDB(t)
	// before: a member committed into the group a's statement will roll back.
	before := begin(t, db, `INSERT INTO item (id, v) VALUES (10, 'before')`)
	aCh := make(chan *sql.Tx, 1)
	go func() {
		tx, err := db.BeginTx(context.Background(), nil)
		if err != nil {
			t.Error(err)
		}
		aCh <- tx
	}()
	waitWaiting(t, w, 1)
	beforeErr := make(chan error, 1)
	go func() { beforeErr <- before.Commit() }() // hands the open group to a
	a := <-aCh
	if a == nil {
		t.FailNow()
	}
	if _, err := a.Exec(`INSERT INTO item (id, v) VALUES (1, 'a')`); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Exec(`INSERT OR ROLLBACK INTO item (id, v) VALUES (1, 'dup')`); err == nil {
		t.Fatal("duplicate insert succeeded")
	}
	_, err := a.Exec(`INSERT INTO item (id, v) VALUES (3, 'after the rollback')`)
	if err == nil {
		t.Error("a statement after SQLite rolled the transaction back ran")
	} else if !errors.Is(err, errRolledBack) {
		t.Errorf("statement after the rollback: %v, want errRolledBack", err)
	}
	var n int
	if err := a.QueryRow(`SELECT count(*) FROM item`).Scan(&n); err == nil {
		t.Error("a query after SQLite rolled the transaction back ran")
	}
	bErr := member(db, `INSERT INTO item (id, v) VALUES (2, 'b')`, (*sql.Tx).Commit)
	waitWaiting(t, w, 1)
	if err := a.Commit(); err == nil {
		t.Fatal("Commit of a transaction SQLite rolled back = nil")
	}
	if err := <-beforeErr; err == nil {
		t.Error("the member before was told committed; SQLite rolled its rows back")
	}
	b := <-bErr
	if got := count(t, r, `SELECT count(*) FROM item WHERE id = 2`); (b == nil) != (got == 1) {
		t.Fatalf("the member after was told %v, and its row stored: %v", b, got == 1)
	}
	if got := count(t, r, `SELECT count(*) FROM item WHERE id IN (1, 3, 10)`); got != 0 {
		t.Fatalf("%d rows of rolled back transactions are stored", got)
	}
}
