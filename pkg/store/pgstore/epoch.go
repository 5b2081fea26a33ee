package pgstore

import (
	"context"
	"sync/atomic"
)

// epochs remembers that the schema has the redaction epoch (migration
// 00018). Schemas only move forward, so once seen it is not probed again.
type epochs struct{ present atomic.Bool }

// redactionEpochSQL reads the redaction epoch (graphrow.Cache).
const redactionEpochSQL = `SELECT epoch FROM redaction_epoch`

// fresh reads the database's redaction epoch and syncs the cache with it
// (graphrow.Cache's contract), reporting whether the cache may serve
// content. It costs one round trip, on the caller's transaction inside Tx.
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
	if err := d.q.QueryRow(ctx, redactionEpochSQL).Scan(&e); err != nil {
		return false
	}
	d.cache.Sync(e)
	return true
}
