package bench

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rath-run/rath/internal/cpustat"
	"github.com/rath-run/rath/pkg/store/pgstore"
)

// dbSample is one reading of the Postgres server that serves the store:
// the CPU time of each process, by pid, and the statements
// pg_stat_statements counted for the database.
type dbSample struct {
	// backends are the client backends connected to the store's database;
	// background are the server's other processes (WAL writer,
	// checkpointer, autovacuum…), which serve every database on it.
	backends, background map[int32]time.Duration
	// local: the server's processes could be read from /proc.
	local bool
	// calls is pg_stat_statements' call count for the database; ok false
	// when the extension is not loaded.
	calls   int64
	callsOK bool
	// wal is the server's WAL insert position (pg_current_wal_lsn), in
	// bytes; ok false on a standby or when it could not be read.
	wal   uint64
	walOK bool
}

// dbProbe reads the Postgres server of a store URL.
type dbProbe struct{ url string }

func (d dbProbe) postgres() bool { return isPostgres(d.url) }

// read takes a sample. It reads /proc only for a server on this machine;
// a remote server's sample has local false.
func (d dbProbe) read(ctx context.Context) (dbSample, error) {
	s := dbSample{}
	if !d.postgres() {
		return s, errors.New("not a Postgres store")
	}
	conn, err := pgx.Connect(ctx, pgstore.ConnURL(d.url))
	if err != nil {
		return s, err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if isLocalHost(conn.PgConn()) {
		rows, err := conn.Query(ctx, `SELECT pid, coalesce(datname = current_database(), false) AND backend_type = 'client backend'
			FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND (datname = current_database() OR datname IS NULL)`)
		if err != nil {
			return s, err
		}
		type row struct {
			PID    int32
			Client bool
		}
		procs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
		if err != nil {
			return s, err
		}
		s.backends, s.background = map[int32]time.Duration{}, map[int32]time.Duration{}
		s.local = len(procs) > 0
		for _, p := range procs {
			t, ok := cpustat.Process(int(p.PID))
			if !ok {
				s.local = false
				break
			}
			if p.Client {
				s.backends[p.PID] = t
			} else {
				s.background[p.PID] = t
			}
		}
	}
	var lsn string
	if err := conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn); err == nil {
		s.wal, s.walOK = parseLSN(lsn)
	}
	err = conn.QueryRow(ctx, `SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements s
		JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = current_database()`).Scan(&s.calls)
	s.callsOK = err == nil
	return s, nil
}

// parseLSN reads a Postgres WAL position ("16/B374D848": the high and low
// 32 bits in hex) as a byte offset.
func parseLSN(s string) (uint64, bool) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, false
	}
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return h<<32 | l, true
}

// isLocalHost reports whether the connection reached a server on this
// machine (a Unix socket or a loopback address).
func isLocalHost(c *pgconn.PgConn) bool {
	host := c.Conn().RemoteAddr().String()
	if strings.HasPrefix(host, "/") || c.Conn().RemoteAddr().Network() == "unix" {
		return true
	}
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		return false
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// cpuDelta is the CPU the processes in b used since a: a process new in
// b counts whole (it started inside the window, bar the moment between its
// fork and a's reading); one that exited before b is missed.
func cpuDelta(a, b map[int32]time.Duration) time.Duration {
	var d time.Duration
	for pid, t := range b {
		d += t - a[pid]
	}
	return d
}

// StatementCounter is a pgx tracer that counts the statements and round
// trips the connections it is installed on make (pgstore.WithQueryTracer
// installs it on a dev stack's pools): a query or Exec is one statement
// and one round trip, BEGIN and COMMIT included; a batch is one round trip
// and one statement per query in it.
type StatementCounter struct {
	statements, roundTrips atomic.Int64
}

// NewStatementCounter returns a counter at zero.
func NewStatementCounter() *StatementCounter { return &StatementCounter{} }

// Counts returns the statements and round trips counted so far.
func (c *StatementCounter) Counts() (statements, roundTrips int64) {
	return c.statements.Load(), c.roundTrips.Load()
}

// TraceQueryStart implements pgx.QueryTracer.
func (c *StatementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.statements.Add(1)
	c.roundTrips.Add(1)
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (c *StatementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart implements pgx.BatchTracer.
func (c *StatementCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.roundTrips.Add(1)
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer.
func (c *StatementCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	c.statements.Add(1)
}

// TraceBatchEnd implements pgx.BatchTracer.
func (c *StatementCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
