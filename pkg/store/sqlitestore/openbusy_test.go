package sqlitestore_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the driver, for a plain connection to the file

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/sqlitestore"
)

// Opening a file that another process is switching to WAL, or holds in a
// transaction before the switch, waits for it as a write waits for a lock.
// SQLite changes the journal mode without calling the busy handler, so the
// open was told SQLITE_BUSY at once (TestMigrateFromProcesses failed with
// it about once in thirty runs: three processes opening a new file).
func TestOpenWaitsForAJournalModeLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rath.db")
	// Another process's connection: the file in its default (rollback)
	// journal mode, a read transaction open on it.
	other, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	other.SetMaxOpenConns(1)
	tx, err := other.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS t (x)`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	type opened struct {
		st  *sqlitestore.Store
		err error
	}
	res := make(chan opened, 1)
	go func() {
		st, err := sqlitestore.Open(ctx, path, sqlitestore.Options{Migrate: true})
		res <- opened{st, err}
	}()
	// Open must still be waiting while the transaction holds the file.
	select {
	case r := <-res:
		if r.st != nil {
			r.st.Close()
		}
		t.Fatalf("Open returned while another connection held the file: %v", r.err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	r := <-res
	if r.err != nil {
		t.Fatalf("Open after the other transaction ended: %v", r.err)
	}
	defer r.st.Close()
	if _, err := session.FromUserMessage(ctx, r.st, "opened"); err != nil {
		t.Fatal(err)
	}
}
