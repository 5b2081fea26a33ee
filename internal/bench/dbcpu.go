package bench

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rath-run/rath/internal/cpustat"
)

// dbCPU reads the CPU time the Postgres backends serving the store's
// database have used, from /proc: it works only for a server on this
// machine whose processes this user can read (Linux). ok is false
// otherwise. Backends that exit before the second reading are missed.
type dbCPU struct{ url string }

func (d dbCPU) read(ctx context.Context) (time.Duration, bool) {
	if !strings.HasPrefix(d.url, "postgres") {
		return 0, false
	}
	conn, err := pgx.Connect(ctx, d.url)
	if err != nil {
		return 0, false
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	if err != nil {
		return 0, false
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil || len(pids) == 0 {
		return 0, false
	}
	return cpustat.Processes(pids)
}
