// Package pgmem is the Postgres memory backend (the cluster's), through
// pgx. Its tables come from Rath's Postgres migrations (00006_memory),
// applied on open under goose's advisory lock like the session store's.
package pgmem

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/rath-run/rath/pkg/memory/internal/sqlmem"
	"github.com/rath-run/rath/pkg/store/pgstore"
)

// Store is the Postgres memory store.
type Store struct{ *sqlmem.Store }

// Open connects to url and migrates.
func Open(ctx context.Context, url string) (*Store, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("open memory store: %w", err)
	}
	if err := pgstore.Migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open memory store: %w", err)
	}
	return New(pool), nil
}

// New returns a store over an open, migrated pool; closing the store
// closes the pool.
func New(pool *pgxpool.Pool) *Store {
	db := stdlib.OpenDBFromPool(pool)
	return &Store{sqlmem.New(db, true, func() error {
		err := db.Close()
		pool.Close()
		return err
	})}
}
