package sqlitestore

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
)

// The statement cache must give each open result set its own statement:
// the same query text run again while the first rows are still open (in
// one transaction, on one connection) reads its own rows.
func TestStmtCacheNestedSameQuery(t *testing.T) {
	ctx := context.Background()
	db, err := openDB(dsn(filepath.Join(t.TempDir(), "c.db"), false))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)`); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := db.ExecContext(ctx, `INSERT INTO t (k, v) VALUES (?, ?)`, i, fmt.Sprint("v", i)); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	const q = `SELECT v FROM t WHERE k >= ? ORDER BY k`
	count := func(from int) (int, error) {
		rows, err := tx.QueryContext(ctx, q, from)
		if err != nil {
			return 0, err
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			n++
		}
		return n, rows.Err()
	}
	nested := func() ([]string, error) {
		outer, err := tx.QueryContext(ctx, q, 0)
		if err != nil {
			return nil, err
		}
		defer outer.Close()
		var got []string
		for outer.Next() {
			var v string
			if err := outer.Scan(&v); err != nil {
				return nil, err
			}
			n, err := count(3)
			if err != nil {
				return nil, err
			}
			got = append(got, fmt.Sprint(v, ":", n))
		}
		return got, outer.Err()
	}
	got, err := nested()
	if err != nil {
		t.Fatal(err)
	}
	if want := "[v0:2 v1:2 v2:2 v3:2 v4:2]"; fmt.Sprint(got) != want {
		t.Fatalf("nested reads = %v, want %s", got, want)
	}
	// After the outer rows closed, the cached statement serves again.
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM t WHERE k >= ?`, 1).Scan(&n); err != nil || n != 4 {
		t.Fatalf("count = %d, %v; want 4", n, err)
	}
}

// Past maxCachedStmts distinct texts, statements are prepared for one use
// and still run; an error (a constraint) leaves the cached statement usable.
func TestStmtCacheBoundAndErrors(t *testing.T) {
	ctx := context.Background()
	db, err := openDB(dsn(filepath.Join(t.TempDir(), "c.db"), false))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (k INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	for i := range maxCachedStmts + 20 {
		q := fmt.Sprintf(`INSERT INTO t (k) VALUES (?) -- %d`, i)
		if _, err := db.ExecContext(ctx, q, i); err != nil {
			t.Fatalf("insert %d: %v", i, err)
		}
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO t (k) VALUES (?)`, 1); err == nil {
		t.Fatal("duplicate key inserted")
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO t (k) VALUES (?)`, 100000); err != nil {
		t.Fatalf("insert after a failed one: %v", err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil || n != maxCachedStmts+21 {
		t.Fatalf("count = %d, %v; want %d", n, err, maxCachedStmts+21)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Raw(func(dc any) error {
		if got := len(dc.(*cachedConn).stmts); got != maxCachedStmts {
			return fmt.Errorf("cached statements = %d, want the bound %d", got, maxCachedStmts)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// The writer keeps its statement journal (a group's savepoints) in memory:
// temp_store is MEMORY (2) on the writer, so the journal never spills to a
// temporary file a write(2) at a time.
func TestWriterTempStoreMemory(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "t.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var mode int
	if err := s.writer.QueryRowContext(ctx, `PRAGMA temp_store`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != 2 {
		t.Fatalf("writer temp_store = %d, want 2 (MEMORY)", mode)
	}
}
