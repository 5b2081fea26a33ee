package pgstore

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rath-run/rath/internal/testdb"
)

// TestSharedEpochReadsSeeEveryEarlierBump: many readers share epoch
// queries while another connection bumps the epoch; every read returns an
// epoch at least as new as the last bump committed before the read began
// (graphrow.Cache's contract), and the readers share round trips.
func TestSharedEpochReadsSeeEveryEarlierBump(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, testdb.Postgres(t), Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var committed atomic.Int64 // the epoch the last committed bump set
	var e0 int64
	if err := st.pool.QueryRow(ctx, redactionEpochSQL).Scan(&e0); err != nil {
		t.Fatal(err)
	}
	committed.Store(e0)

	stop := make(chan struct{})
	var bumps sync.WaitGroup
	bumps.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			var e int64
			if err := st.pool.QueryRow(ctx, `UPDATE redaction_epoch SET epoch = epoch + 1 RETURNING epoch`).Scan(&e); err != nil {
				t.Error(err)
				return
			}
			committed.Store(e)
			time.Sleep(time.Millisecond)
		}
	})
	const readers, each = 16, 100
	var wg sync.WaitGroup
	var queries atomic.Int64
	for range readers {
		wg.Go(func() {
			for range each {
				floor := committed.Load()
				e, err := st.epochs.read(ctx, countingQuerier{querier: st.pool, n: &queries})
				if err != nil {
					t.Error(err)
					return
				}
				if e < floor {
					t.Errorf("read epoch %d after a bump to %d had committed", e, floor)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	bumps.Wait()
	if n := queries.Load(); n >= readers*each {
		t.Errorf("%d queries for %d concurrent reads: none shared", n, readers*each)
	}
	t.Logf("%d epoch queries for %d reads", queries.Load(), readers*each)
}

// countingQuerier counts the queries sent through QueryRow.
type countingQuerier struct {
	querier
	n *atomic.Int64
}

func (c countingQuerier) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c.n.Add(1)
	return c.querier.QueryRow(ctx, sql, args...)
}
