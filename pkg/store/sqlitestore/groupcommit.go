package sqlitestore

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"modernc.org/sqlite"
)

// Group commit on the writer. SQLite has one writer, and each commit
// writes every page its transaction changed to the WAL again: a step's
// three transactions touch the same table and index pages as the steps
// beside it. So the writer's transactions share commits. The writer
// database/sql handle hands out any number of connections, and each is a
// view of the one SQLite connection (groupConnector). A read-write
// transaction holds that connection from its BEGIN to its COMMIT, as
// before, but its COMMIT only releases a savepoint when other
// transactions are waiting for the connection: the next one carries on
// in the same SQLite transaction, and the last of the group (nobody
// waiting, or maxGroup members) commits it for all. Every member's Commit
// returns after that commit, with its error: the group commits or fails
// as one, so no caller hears "committed" before its rows are.
//
// A member that rolls back undoes its own savepoint only. What runs
// outside a read-write transaction (a statement without one, a read-only
// transaction) commits the open group first and then runs alone, as it
// would on a connection of its own: its PRAGMAs and its autocommit keep
// their meaning. Statements inside a group run without their context's
// cancellation: SQLite rolls a whole transaction back when a write in it
// is interrupted, which would undo the other members' work. A context
// still ends the wait for the connection. A PRAGMA a member runs lasts
// for the rest of its group. Closing the handle waits for the
// transaction in progress, then commits the open group. A member must
// not wait on anything slow (a client, the network) inside its
// transaction: the members before it wait for its end to hear their
// commit; Bulk's transactions run alone for that reason.

// maxGroup bounds a group's members, so a steady queue still commits.
const maxGroup = 64

// aloneKey marks a context whose write transaction runs alone: one that
// may last (a bulk import reads its client's upload inside it) would
// hold back the commit of every member before it in its group.
type aloneKey struct{}

// alone returns ctx marked so that a write transaction begun with it
// runs alone.
func alone(ctx context.Context) context.Context { return context.WithValue(ctx, aloneKey{}, true) }

// groupConnector is the writer's driver.Connector: every connection it
// returns shares one connection of inner.
type groupConnector struct {
	inner driver.Connector
	w     writer
}

// writer is the one SQLite connection and its open group. One holder at a
// time uses conn: acquire makes the caller the holder, at once or when a
// holder hands it over (first come, first served), and release ends the
// hold. release decides, under mu, whether to commit the open group or to
// hand the connection, the group still open, to the next waiter: a
// waiter is either handed the connection or has left the queue by then,
// so a group left open always has a holder who will decide again.
type writer struct {
	mu    sync.Mutex
	held  bool
	queue []chan struct{} // waiters, each handed the connection by closing its channel
	// queued, when set (tests), is signaled when a waiter joins queue.
	queued  chan struct{}
	toClose []driver.Stmt // statements closed while another held the connection
	// stmts are the views' prepared statements not yet finalized: Close
	// finalizes them before it closes the connection.
	stmts map[driver.Stmt]struct{}

	// openMu guards opening conn and closed (which the holder also reads).
	openMu sync.Mutex
	conn   *cachedConn
	closed bool

	// These belong to the holder.
	open    bool // a group transaction is open on conn
	members int  // transactions committed into the open group
	cur     *group
	// rolledBack is set by SQLite's rollback hook when a transaction on
	// conn is rolled back, explicitly or by SQLite itself after an error
	// (a full disk, INSERT OR ROLLBACK); it is cleared when a transaction
	// begins. While it is set, the statements of the transaction in
	// progress are refused (errRolledBack): run after such a rollback,
	// they would commit one by one outside any transaction.
	rolledBack bool

	// commits and grouped count the group commits and the transactions
	// they carried (GroupCommits; tests).
	commits, grouped atomic.Int64
}

// group is one SQLite transaction's outcome, for its members.
type group struct {
	done chan struct{}
	err  error
}

func newGroupConnector(inner driver.Connector) *groupConnector {
	c := &groupConnector{inner: inner}
	c.w.stmts = make(map[driver.Stmt]struct{})
	return c
}

// Connect implements [driver.Connector]: the first call opens the SQLite
// connection; every call returns a view of it.
func (c *groupConnector) Connect(ctx context.Context) (driver.Conn, error) {
	c.w.openMu.Lock()
	defer c.w.openMu.Unlock()
	if c.w.closed {
		return nil, driver.ErrBadConn
	}
	if c.w.conn == nil {
		dc, err := c.inner.Connect(ctx)
		if err != nil {
			return nil, err
		}
		h, ok := dc.(sqlite.HookRegisterer)
		if !ok {
			_ = dc.Close()
			return nil, fmt.Errorf("sqlite driver connection %T has no rollback hook", dc)
		}
		h.RegisterRollbackHook(func() { c.w.rolledBack = true })
		cc, err := newCachedConn(dc)
		if err != nil {
			return nil, err
		}
		c.w.conn = cc.(*cachedConn)
	}
	return &groupConn{w: &c.w}, nil
}

// Driver implements [driver.Connector].
func (c *groupConnector) Driver() driver.Driver { return c.inner.Driver() }

// Close closes the SQLite connection; database/sql calls it when the
// handle closes. It waits for the holder of the connection (a
// transaction in progress) to end, commits the open group, and finalizes
// the statements left to close; what uses a view afterwards gets
// driver.ErrBadConn.
func (c *groupConnector) Close() error {
	w := &c.w
	_ = w.acquire(context.Background()) // cannot fail: no cancellation
	defer w.release()
	w.flush()
	w.mu.Lock()
	open := make([]driver.Stmt, 0, len(w.stmts))
	for st := range w.stmts {
		open = append(open, st)
	}
	w.toClose = nil
	clear(w.stmts)
	w.mu.Unlock()
	for _, st := range open {
		_ = st.Close()
	}
	w.openMu.Lock()
	defer w.openMu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	if w.conn == nil {
		return nil
	}
	return w.conn.Close()
}

// acquire makes the caller the holder of the connection, or returns the
// context's error if it ends first.
func (w *writer) acquire(ctx context.Context) error {
	w.mu.Lock()
	if !w.held && len(w.queue) == 0 {
		w.held = true
		w.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	w.queue = append(w.queue, ch)
	if w.queued != nil {
		select {
		case w.queued <- struct{}{}:
		default:
		}
	}
	w.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	}
	w.mu.Lock()
	for i, q := range w.queue {
		if q == ch {
			w.queue = append(w.queue[:i], w.queue[i+1:]...)
			w.mu.Unlock()
			return ctx.Err()
		}
	}
	w.mu.Unlock()
	// Handed the connection as the context ended: hold it, then end the
	// hold as any holder does.
	<-ch
	w.release()
	return ctx.Err()
}

// release ends the holder's hold: it finalizes the statements closed in
// the meantime, commits the open group when nobody waits to join it (or
// it is full), and hands the connection to the next waiter, if any.
func (w *writer) release() {
	for {
		w.mu.Lock()
		pending := len(w.toClose) > 0
		commit := w.open && (len(w.queue) == 0 || w.members >= maxGroup)
		if !pending && !commit {
			if len(w.queue) > 0 {
				next := w.queue[0]
				w.queue = w.queue[1:]
				close(next) // the connection is next's; held stays true
			} else {
				w.held = false
			}
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		w.finalizePending()
		if commit {
			w.commitGroup()
		}
	}
}

// waiters is the number of callers waiting for the connection.
func (w *writer) waiters() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queue)
}

// finalizePending finalizes the statements closed while another held the
// connection; the holder calls it.
func (w *writer) finalizePending() {
	w.mu.Lock()
	pending := w.toClose
	w.toClose = nil
	w.mu.Unlock()
	for _, s := range pending {
		_ = w.finalize(s)
	}
}

// finalize finalizes a view's statement, unless Close did; the holder
// calls it.
func (w *writer) finalize(s driver.Stmt) error {
	w.mu.Lock()
	_, open := w.stmts[s]
	delete(w.stmts, s)
	w.mu.Unlock()
	if !open || w.closed {
		return nil
	}
	return s.Close()
}

// commitGroup commits the open group and tells its members.
func (w *writer) commitGroup() {
	g := w.cur
	_, err := w.conn.ExecContext(context.Background(), "COMMIT", nil)
	if err != nil {
		// A commit SQLite refused (a deferred foreign key) leaves the
		// transaction open: roll it back.
		_, _ = w.conn.ExecContext(context.Background(), "ROLLBACK", nil)
		err = fmt.Errorf("group commit: %w", err)
	}
	w.open, w.cur = false, nil
	w.commits.Add(1)
	w.grouped.Add(int64(w.members))
	w.members = 0
	g.err = err
	close(g.done)
}

// abortGroup rolls the open group back and tells its members err.
func (w *writer) abortGroup(err error) {
	_, _ = w.conn.ExecContext(context.Background(), "ROLLBACK", nil)
	g := w.cur
	w.open, w.cur, w.members = false, nil, 0
	g.err = err
	close(g.done)
}

// flush commits the open group, if any, for what must run outside it.
func (w *writer) flush() {
	if w.open {
		w.commitGroup()
	}
}

// groupConn is one database/sql connection: a view of the writer.
type groupConn struct {
	w  *writer
	tx *groupTx // the transaction this view holds the writer for
}

var (
	_ driver.Conn               = (*groupConn)(nil)
	_ driver.ConnBeginTx        = (*groupConn)(nil)
	_ driver.ConnPrepareContext = (*groupConn)(nil)
	_ driver.ExecerContext      = (*groupConn)(nil)
	_ driver.QueryerContext     = (*groupConn)(nil)
	_ driver.SessionResetter    = (*groupConn)(nil)
	_ driver.Validator          = (*groupConn)(nil)
)

// Prepare implements [driver.Conn].
func (c *groupConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

// hold makes the caller the holder for a statement outside a
// transaction: the open group commits first, and the statement runs on
// its own, as on a connection of its own.
func (c *groupConn) hold(ctx context.Context) error {
	if err := c.w.acquire(ctx); err != nil {
		return err
	}
	if c.w.closed {
		c.w.release()
		return driver.ErrBadConn
	}
	c.w.flush()
	return nil
}

// PrepareContext implements [driver.ConnPrepareContext]: the statement
// runs on the writer the view's transaction holds, or alone outside one
// (groupStmt).
func (c *groupConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	var s driver.Stmt
	var err error
	if c.tx != nil {
		s, err = c.w.conn.PrepareContext(context.WithoutCancel(ctx), query)
	} else {
		if err := c.hold(ctx); err != nil {
			return nil, err
		}
		s, err = c.w.conn.PrepareContext(ctx, query)
		c.w.release()
	}
	if err != nil {
		return nil, err
	}
	is, ok := s.(innerStmt)
	if !ok {
		_ = s.Close()
		return nil, fmt.Errorf("sqlite driver statement %T lacks the context methods", s)
	}
	c.w.mu.Lock()
	c.w.stmts[is] = struct{}{}
	c.w.mu.Unlock()
	return &groupStmt{c: c, s: is}, nil
}

// Close implements [driver.Conn]; the SQLite connection stays open for the
// other views (groupConnector.Close closes it).
func (c *groupConn) Close() error { return nil }

// Begin implements [driver.Conn].
func (c *groupConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

// BeginTx implements [driver.ConnBeginTx]: a read-write transaction of the
// default isolation joins the open group, or opens one; any other, and
// one whose context is marked alone, runs alone after the group commits.
func (c *groupConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	w := c.w
	if opts.ReadOnly || opts.Isolation != driver.IsolationLevel(0) || ctx.Value(aloneKey{}) != nil {
		if err := c.hold(ctx); err != nil {
			return nil, err
		}
		tx, err := w.conn.BeginTx(ctx, opts)
		if err != nil {
			w.release()
			return nil, err
		}
		w.rolledBack = false
		c.tx = &groupTx{c: c, alone: tx}
		return c.tx, nil
	}
	if err := w.acquire(ctx); err != nil {
		return nil, err
	}
	if w.closed {
		w.release()
		return nil, driver.ErrBadConn
	}
	bg := context.WithoutCancel(ctx)
	if !w.open {
		// The writer connection's DSN asks for BEGIN IMMEDIATE (_txlock):
		// the write lock up front, waiting out another process's writer
		// in the busy timeout.
		if _, err := w.conn.ExecContext(bg, "BEGIN IMMEDIATE", nil); err != nil {
			w.release()
			return nil, err
		}
		w.open, w.cur, w.rolledBack = true, &group{done: make(chan struct{})}, false
	}
	// Every member works under a savepoint: its rollback undoes its own
	// work only, and its RELEASE fails if SQLite rolled the whole
	// transaction back after an error (a full disk, an I/O error).
	if _, err := w.conn.ExecContext(bg, "SAVEPOINT rath_member", nil); err != nil {
		w.abortGroup(fmt.Errorf("group commit: a member's savepoint failed: %w", err))
		w.release()
		return nil, err
	}
	c.tx = &groupTx{c: c}
	return c.tx, nil
}

// groupTx is one member of a group, or (alone set) a transaction that
// runs by itself.
type groupTx struct {
	c     *groupConn
	alone driver.Tx
}

// Commit implements [driver.Tx]: it returns once the member's group has
// committed, with the group's error.
func (t *groupTx) Commit() error {
	w := t.c.w
	t.c.tx = nil
	if t.alone != nil {
		return t.endAlone(t.alone.Commit)
	}
	if _, err := w.conn.ExecContext(context.Background(), "RELEASE rath_member", nil); err != nil {
		err = errors.Join(err, t.undo())
		w.release()
		return err
	}
	g := w.cur
	w.members++
	w.release()
	<-g.done
	return g.err
}

// Rollback implements [driver.Tx]: the member's own work is undone; the
// group it was in goes on.
func (t *groupTx) Rollback() error {
	w := t.c.w
	t.c.tx = nil
	if t.alone != nil {
		return t.endAlone(t.alone.Rollback)
	}
	err := t.undo()
	w.release()
	return err
}

// endAlone ends a transaction that ran alone with end (its Commit or
// Rollback) and releases the writer.
func (t *groupTx) endAlone(end func() error) error {
	err := end()
	t.c.w.release()
	return err
}

// undo rolls back the member's work: to its savepoint, or the whole
// transaction when no member committed into it yet. When the savepoint is
// gone, SQLite rolled the whole transaction back after an error: the
// group fails, and its members hear so. (A caller that went on after
// such an error had its statements refused: errRolledBack.)
func (t *groupTx) undo() error {
	w := t.c.w
	bg := context.Background()
	if w.members == 0 {
		_, err := w.conn.ExecContext(bg, "ROLLBACK", nil)
		w.abortGroup(errors.New("group rolled back"))
		return err
	}
	_, err := w.conn.ExecContext(bg, "ROLLBACK TO rath_member", nil)
	if err == nil {
		_, err = w.conn.ExecContext(bg, "RELEASE rath_member", nil)
	}
	if err != nil {
		w.abortGroup(fmt.Errorf("group commit: a member's rollback failed: %w", err))
	}
	return err
}

// ExecContext implements [driver.ExecerContext]: inside the view's
// transaction, on the writer; outside one, alone (hold).
func (c *groupConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return c.exec(ctx, func(ctx context.Context) (driver.Result, error) { return c.w.conn.ExecContext(ctx, query, args) })
}

// exec runs a statement: in the view's transaction, on the writer it
// holds; outside one, alone (hold).
func (c *groupConn) exec(ctx context.Context, run func(context.Context) (driver.Result, error)) (driver.Result, error) {
	if c.tx != nil {
		return inTx(ctx, c, run)
	}
	if err := c.hold(ctx); err != nil {
		return nil, err
	}
	defer c.w.release()
	return run(ctx)
}

// QueryContext implements [driver.QueryerContext]. Outside a transaction
// the rows hold the writer until they are closed.
func (c *groupConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.query(ctx, func(ctx context.Context) (driver.Rows, error) { return c.w.conn.QueryContext(ctx, query, args) })
}

// query runs a query as exec runs a statement; outside a transaction its
// rows hold the writer until they are closed.
func (c *groupConn) query(ctx context.Context, run func(context.Context) (driver.Rows, error)) (driver.Rows, error) {
	if c.tx != nil {
		return inTx(ctx, c, run)
	}
	if err := c.hold(ctx); err != nil {
		return nil, err
	}
	rows, err := run(ctx)
	if err != nil {
		c.w.release()
		return nil, err
	}
	return &groupRows{typedRows: typedRows{rows}, w: c.w}, nil
}

// inTx runs a statement of the view's transaction: a group member's
// statements are not interrupted, and none runs once SQLite rolled the
// transaction back (errRolledBack).
func inTx[T any](ctx context.Context, c *groupConn, run func(context.Context) (T, error)) (T, error) {
	if c.w.rolledBack {
		var zero T
		return zero, errRolledBack
	}
	if c.tx.alone == nil {
		ctx = context.WithoutCancel(ctx)
	}
	return run(ctx)
}

// ResetSession implements [driver.SessionResetter].
func (c *groupConn) ResetSession(context.Context) error { return nil }

// IsValid implements [driver.Validator].
func (c *groupConn) IsValid() bool { return true }

// groupRows releases the writer when closed.
type groupRows struct {
	typedRows
	w    *writer
	done bool
}

func (r *groupRows) Close() error {
	err := r.Rows.Close()
	if !r.done {
		r.done = true
		r.w.release()
	}
	return err
}

// groupStmt is a prepared statement of a view: inside the view's
// transaction it runs on the writer the transaction holds, outside one it
// runs alone. Closing it finalizes it on the SQLite connection, which
// needs the writer: without a transaction of its view, the statement is
// finalized at once if the writer is free, else by its holder when it
// releases (database/sql closes statements while holding its own lock,
// and closes a transaction's after the transaction ended).
type groupStmt struct {
	c *groupConn
	s innerStmt
}

func (s *groupStmt) Close() error {
	w := s.c.w
	if s.c.tx != nil {
		return w.finalize(s.s)
	}
	w.mu.Lock()
	if w.held || len(w.queue) > 0 {
		w.toClose = append(w.toClose, s.s)
		w.mu.Unlock()
		return nil
	}
	w.held = true
	w.mu.Unlock()
	err := w.finalize(s.s)
	w.release()
	return err
}

func (s *groupStmt) NumInput() int { return s.s.NumInput() }

func (s *groupStmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.ExecContext(context.Background(), named(args))
}

func (s *groupStmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.QueryContext(context.Background(), named(args))
}

func named(args []driver.Value) []driver.NamedValue {
	nv := make([]driver.NamedValue, len(args))
	for i, a := range args {
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	return nv
}

func (s *groupStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	return s.c.exec(ctx, func(ctx context.Context) (driver.Result, error) { return s.s.ExecContext(ctx, args) })
}

func (s *groupStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	return s.c.query(ctx, func(ctx context.Context) (driver.Rows, error) { return s.s.QueryContext(ctx, args) })
}

// errRolledBack refuses a statement of a transaction that SQLite rolled
// back as a whole after an error in it.
var errRolledBack = errors.New("sqlitestore: SQLite rolled this transaction back after an error in it; it can only be rolled back")
