package pgstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// epochs remembers that the schema has the redaction epoch (migration
// 00018) and coalesces the pool's epoch reads. Schemas only move forward,
// so once seen it is not probed again.
type epochs struct {
	present atomic.Bool

	mu   sync.Mutex
	busy bool       // an epoch read is in flight on the pool
	next *epochRead // the read callers arriving meanwhile share; not sent yet
}

// epochRead is one epoch query shared by the callers that joined it before
// it was sent.
type epochRead struct {
	ready chan struct{} // closed when e and err are set
	e     int64
	err   error
}

// epochReadTimeout bounds a shared read sent on behalf of other callers
// (the caller that sends its own read bounds it with its context).
const epochReadTimeout = 10 * time.Second

// redactionEpochSQL reads the redaction epoch (graphrow.Cache).
const redactionEpochSQL = `SELECT epoch FROM redaction_epoch`

// read returns the database's redaction epoch as a query sent after the
// call began saw it: the cache's contract needs no more (a redaction
// committed before the call began is seen). Concurrent callers share
// queries: with none in flight a caller sends its own at once; callers
// arriving while one is in flight share the next, sent when it returns.
// Under load the epoch costs about one round trip per round-trip time
// instead of one per read.
func (es *epochs) read(ctx context.Context, q querier) (int64, error) {
	es.mu.Lock()
	if es.next == nil {
		es.next = &epochRead{ready: make(chan struct{})}
	}
	r := es.next
	if !es.busy {
		es.busy, es.next = true, nil
		es.mu.Unlock()
		es.send(ctx, q, r)
		return r.e, r.err
	}
	es.mu.Unlock()
	select {
	case <-r.ready:
		return r.e, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// send runs r's query, then hands the reads that queued meanwhile to a
// goroutine of their own (so this caller returns after one round trip).
func (es *epochs) send(ctx context.Context, q querier, r *epochRead) {
	r.err = q.QueryRow(ctx, redactionEpochSQL).Scan(&r.e)
	close(r.ready)
	es.mu.Lock()
	next := es.next
	if next == nil {
		es.busy = false
		es.mu.Unlock()
		return
	}
	es.next = nil
	es.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), epochReadTimeout)
		defer cancel()
		es.send(ctx, q, next)
	}()
}

// fresh reads the database's redaction epoch and syncs the cache with it
// (graphrow.Cache's contract), reporting whether the cache may serve
// content. It costs one round trip, on the caller's transaction inside Tx;
// outside one, concurrent reads share round trips ([epochs.read]).
// When the epoch cannot be read (a schema before migration 00018, an
// error) nothing is served from the cache: the caller reads the database,
// which reports any real error itself.
func (d *db) fresh(ctx context.Context) bool {
	if d.cache == nil || d.epochs == nil {
		return false
	}
	if !d.epochs.present.Load() {
		if d.inTx {
			// A failed probe would abort the caller's transaction.
			return false
		}
		var ok bool
		if err := d.q.QueryRow(ctx, `SELECT to_regclass('redaction_epoch') IS NOT NULL`).Scan(&ok); err != nil || !ok {
			return false
		}
		d.epochs.present.Store(true)
	}
	var e int64
	var err error
	if d.inTx {
		err = d.q.QueryRow(ctx, redactionEpochSQL).Scan(&e)
	} else {
		e, err = d.epochs.read(ctx, d.q)
	}
	if err != nil {
		return false
	}
	d.cache.Sync(e)
	return true
}
