package trainset

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/rath-run/rath/pkg/store"
)

// Filter is a further test on a trajectory end ([Options.Filter]).
type Filter func(ctx context.Context, v store.Info) (bool, error)

// SQLFilter returns a [Filter] keeping the versions for which where, a SQL
// boolean expression, holds. It is evaluated per version as
//
//	SELECT 1 FROM versions v WHERE v.id = ID AND (where)
//
// so it can name the versions columns (v.run, v.agent, v.model, v.op,
// v.created_at, …) and reach the lineage views (rath_transcript,
// rath_chunk_origin, rath_ancestors, rath_descendants) through subqueries.
// It runs in one read-only transaction held until close is called: it
// can read, never write. It is for a store opened directly (rathctl
// --store), never for a coordinator's shared database.
func SQLFilter(ctx context.Context, db *sql.DB, postgres bool, where string) (Filter, func() error, error) {
	if strings.TrimSpace(where) == "" {
		return nil, nil, errors.New("where: empty SQL expression")
	}
	if strings.Contains(where, ";") {
		return nil, nil, fmt.Errorf("where %q: one SQL expression, no ';'", where)
	}
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, nil, fmt.Errorf("where: begin a read-only transaction: %w", err)
	}
	if !postgres {
		// database/sql's ReadOnly is not enforced by every SQLite driver;
		// query_only is, for this connection, until the end of the filter.
		if _, err := tx.ExecContext(ctx, "PRAGMA query_only = 1"); err != nil {
			_ = tx.Rollback()
			return nil, nil, fmt.Errorf("where: make the transaction read-only: %w", err)
		}
	}
	ph := "?"
	if postgres {
		ph = "$1"
	}
	q := "SELECT 1 FROM versions v WHERE v.id = " + ph + " AND (" + where + ")"
	stmt, err := tx.PrepareContext(ctx, q)
	if err != nil {
		_ = tx.Rollback()
		return nil, nil, fmt.Errorf("where %q: %w", where, err)
	}
	filter := func(ctx context.Context, v store.Info) (bool, error) {
		var one int
		err := stmt.QueryRowContext(ctx, v.ID.String()).Scan(&one)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("where %q on %s: %w", where, v.ID, err)
		}
		return true, nil
	}
	closeFn := func() error {
		_ = stmt.Close()
		if !postgres {
			_, _ = tx.ExecContext(context.WithoutCancel(ctx), "PRAGMA query_only = 0")
		}
		return tx.Rollback()
	}
	return filter, closeFn, nil
}
