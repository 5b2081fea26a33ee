package cpustat

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Querier runs a query: a *pgx.Conn or a *pgxpool.Pool.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Backends returns the CPU time (user + system) the Postgres server
// processes connected to q's database have used, the one answering the
// query included, read from /proc: false where they cannot be read (the
// server is not on this machine, or a process exited meanwhile).
// Benchmarks report the database's CPU per operation with it.
func Backends(ctx context.Context, q Querier) (time.Duration, bool) {
	rows, err := q.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		return 0, false
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return 0, false
	}
	return Processes(pids)
}
