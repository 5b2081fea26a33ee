package bench

import (
	"context"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
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
	var total time.Duration
	for _, pid := range pids {
		t, ok := procCPU(int(pid))
		if !ok {
			return 0, false
		}
		total += t
	}
	return total, true
}

// procCPU returns a process's user+system CPU time from /proc/PID/stat.
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// Fields after the command (which may hold spaces) in parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	const clockTicks = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / clockTicks, true
}
