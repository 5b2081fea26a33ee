package runs

import (
	"context"
	"math/bits"
	"sync/atomic"
	"time"
)

// Young plans. Postgres plans a table it has no statistics for by its size
// when the plan is made, and a connection keeps a prepared statement's
// generic plan until the statistics of a table the statement reads change.
// On a new store those plans are made on tables of a few pages, and under
// the row-level security of rath_worker and rath_coordinator they join a
// step's input, a version's base and the rows the policies check by
// scanning the whole table: every step start and version insert of a
// cluster scanned all of versions while the store grew by thousands of
// rows a second, until autovacuum's first ANALYZE up to a minute later
// (TestYoungPlansMadeAnewAsTheStoreGrows; issue 25, twentieth round).
//
// So a store on Postgres asks the database to take the hot tables'
// statistics as it grows: after its 64th fast-path commit and at every
// power of two after that, up to refreshLast, it calls
// rath_refresh_statistics() (migration 00027), which analyzes the hot
// tables once one has grown fourfold since it was last measured, until
// their statistics describe 256 pages. ANALYZE invalidates the plans that
// read the table, in every connection of every process on the database,
// and each is made anew at its next use, on the table as it has grown; a
// table whose statistics say it has thousands of rows is read by key.
// Making a plan anew costs a connection milliseconds for each of these
// statements, hence the fourfold steps and the end: three or four rounds
// in a store's life, past which autovacuum's thresholds serve. The call
// is one round trip when nothing is due.
//
// The call is made by the commit that reaches the count, after its own
// transaction, so that commit's caller waits for it (milliseconds: the
// tables are small while anything is due, and the function skips a table
// autovacuum holds): seventeen calls in a store's life, none of them on
// the way of another step.
const (
	refreshFirst = 64
	refreshLast  = 1 << 22
	// refreshTimeout bounds one call.
	refreshTimeout = 10 * time.Second
)

// statistics counts a store's fast-path commits.
type statistics struct{ commits atomic.Int64 }

// due counts one commit and reports whether the store should refresh the
// statistics now.
func (c *statistics) due() bool {
	n := c.commits.Add(1)
	return n >= refreshFirst && n <= refreshLast && bits.OnesCount64(uint64(n)) == 1
}

// grew counts a fast-path commit and, when one is due, refreshes the hot
// tables' statistics. A failure (a schema without migration 00027, a
// connection lost) is dropped: the plans stay as they were, and the next
// call tries again.
func (s *Store) grew(ctx context.Context) {
	if !s.stats.due() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refreshTimeout)
	defer cancel()
	_, _ = s.refreshStatistics(ctx)
}

// refreshStatistics asks Postgres to analyze the hot tables of a young
// store that have grown since they were last measured (see
// rath_refresh_statistics in migration 00027), and returns how many it
// analyzed. On SQLite it does nothing.
func (s *Store) refreshStatistics(ctx context.Context) (int, error) {
	if !s.relaxed {
		return 0, nil
	}
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT rath_refresh_statistics()`).Scan(&n)
	return n, err
}
