package sqlitestore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"reflect"

	"modernc.org/sqlite"
)

// maxCachedStmts bounds the prepared statements a connection keeps: the
// store, the run store and the memory store issue a few dozen distinct
// statements; text built per call (IN lists of varying length) past the
// bound is prepared for its one use, as without the cache.
const maxCachedStmts = 256

// openDB opens a database/sql handle on dsn whose connections keep each
// statement they run prepared ([cachedConn]): the driver otherwise parses
// and plans every ExecContext and QueryContext anew, which was a fifth of
// the dev stack's CPU per step.
func openDB(dsn string) (*sql.DB, error) {
	c, err := sqlite.NewConnector(dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite connector: %w", err)
	}
	return sql.OpenDB(stmtCacheConnector{c}), nil
}

// openWriter opens the writer's database/sql handle on dsn: one SQLite
// connection, keeping its statements prepared as openDB's do, whose
// transactions share commits (groupcommit.go).
func openWriter(dsn string) (*sql.DB, *groupConnector, error) {
	c, err := sqlite.NewConnector(dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("sqlite connector: %w", err)
	}
	g := newGroupConnector(c)
	return sql.OpenDB(g), g, nil
}

type stmtCacheConnector struct{ driver.Connector }

func (c stmtCacheConnector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return newCachedConn(dc)
}

// innerConn is what the SQLite driver's connection implements and
// database/sql uses.
type innerConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// innerStmt is what the SQLite driver's statement implements.
type innerStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

// cachedStmt is a statement a connection keeps; busy while rows read from
// it are open (a second query of the same text then prepares its own).
type cachedStmt struct {
	s    innerStmt
	busy bool
}

// cachedConn is a SQLite connection that prepares each statement text once
// and runs it again from then on. database/sql uses a connection from one
// goroutine at a time, so the map needs no lock.
type cachedConn struct {
	innerConn
	stmts map[string]*cachedStmt
}

func newCachedConn(dc driver.Conn) (driver.Conn, error) {
	ic, ok := dc.(innerConn)
	if !ok {
		_ = dc.Close()
		return nil, fmt.Errorf("sqlite driver connection %T lacks the context methods", dc)
	}
	return &cachedConn{innerConn: ic, stmts: make(map[string]*cachedStmt)}, nil
}

// stmt returns the cached statement for query, preparing and caching it on
// first use; temp reports a statement prepared for this one use (the cache
// is full, or its statement is busy), which the caller closes.
func (c *cachedConn) stmt(ctx context.Context, query string) (cs *cachedStmt, temp bool, err error) {
	if cs, ok := c.stmts[query]; ok && !cs.busy {
		return cs, false, nil
	}
	ds, err := c.PrepareContext(ctx, query)
	if err != nil {
		return nil, false, err
	}
	s, ok := ds.(innerStmt)
	if !ok {
		_ = ds.Close()
		return nil, false, fmt.Errorf("sqlite driver statement %T lacks the context methods", ds)
	}
	cs = &cachedStmt{s: s}
	if _, taken := c.stmts[query]; taken || len(c.stmts) >= maxCachedStmts {
		return cs, true, nil
	}
	c.stmts[query] = cs
	return cs, false, nil
}

// ExecContext implements [driver.ExecerContext].
func (c *cachedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	cs, temp, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	res, err := cs.s.ExecContext(ctx, args)
	if temp {
		err = closeJoin(err, cs.s)
	}
	return res, err
}

// QueryContext implements [driver.QueryerContext].
func (c *cachedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	cs, temp, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	rows, err := cs.s.QueryContext(ctx, args)
	if err != nil {
		if temp {
			err = closeJoin(err, cs.s)
		}
		return nil, err
	}
	cs.busy = !temp
	return &cachedRows{typedRows: typedRows{rows}, cs: cs, temp: temp}, nil
}

// Close closes the cached statements, then the connection.
func (c *cachedConn) Close() error {
	var err error
	for q, cs := range c.stmts {
		err = closeJoin(err, cs.s)
		delete(c.stmts, q)
	}
	return closeJoin(err, c.innerConn)
}

func closeJoin(err error, c interface{ Close() error }) error {
	if e := c.Close(); e != nil && err == nil {
		return e
	}
	return err
}

// cachedRows frees its statement for the next query when closed (the
// driver resets a cached statement then instead of finalizing it).
type cachedRows struct {
	typedRows
	cs   *cachedStmt
	temp bool
	done bool
}

func (r *cachedRows) Close() error {
	err := r.Rows.Close()
	if r.done {
		return err
	}
	r.done = true
	if r.temp {
		return closeJoin(err, r.cs.s)
	}
	r.cs.busy = false
	return err
}

// typedRows passes through the column type methods database/sql's
// ColumnTypes uses, which embedding the driver.Rows interface would hide.
type typedRows struct{ driver.Rows }

func (r typedRows) ColumnTypeDatabaseTypeName(i int) string {
	if t, ok := r.Rows.(driver.RowsColumnTypeDatabaseTypeName); ok {
		return t.ColumnTypeDatabaseTypeName(i)
	}
	return ""
}

func (r typedRows) ColumnTypeLength(i int) (int64, bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypeLength); ok {
		return t.ColumnTypeLength(i)
	}
	return 0, false
}

func (r typedRows) ColumnTypeNullable(i int) (nullable, ok bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypeNullable); ok {
		return t.ColumnTypeNullable(i)
	}
	return false, false
}

func (r typedRows) ColumnTypePrecisionScale(i int) (precision, scale int64, ok bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypePrecisionScale); ok {
		return t.ColumnTypePrecisionScale(i)
	}
	return 0, 0, false
}

func (r typedRows) ColumnTypeScanType(i int) reflect.Type {
	if t, ok := r.Rows.(driver.RowsColumnTypeScanType); ok {
		return t.ColumnTypeScanType(i)
	}
	return reflect.TypeFor[any]()
}
