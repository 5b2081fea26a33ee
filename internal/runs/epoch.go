package runs

import (
	"context"
	"database/sql"
	"sync/atomic"
	"time"
)

// epochReprobe is how long a store waits before it asks Postgres again
// whether its role may read the redaction epoch, while the answer is no.
const epochReprobe = 10 * time.Second

// epochProbe remembers whether the start statement may read the redaction
// epoch (migration 00018 made the table; a role the migration could not
// grant it to may not read it). The answer can change from no to yes
// only: a worker that opened its store before the coordinator migrated the
// schema asks again, at most every epochReprobe, instead of deciding once
// at Open and paying a round trip more per step for its whole life. Once
// yes, it is never asked again: schemas only move forward.
type epochProbe struct {
	yes  atomic.Bool
	next atomic.Int64 // when (Unix nanoseconds) a no may be asked again
}

// known reports whether the start statement reads the epoch, asking
// Postgres the first time and then whenever the last no is older than
// epochReprobe (now is the store's clock).
func (p *epochProbe) known(ctx context.Context, db *sql.DB, now time.Time) bool {
	if p.yes.Load() {
		return true
	}
	next := p.next.Load()
	if now.UnixNano() < next || !p.next.CompareAndSwap(next, now.Add(epochReprobe).UnixNano()) {
		return false // asked lately, or another start is asking now
	}
	return p.ask(ctx, db)
}

func (p *epochProbe) ask(ctx context.Context, db *sql.DB) bool {
	var ok bool
	err := db.QueryRowContext(ctx, `SELECT CASE WHEN to_regclass('redaction_epoch') IS NULL THEN false
		ELSE has_table_privilege('redaction_epoch', 'SELECT') END`).Scan(&ok)
	if err == nil && ok {
		p.yes.Store(true)
	}
	return p.yes.Load()
}
