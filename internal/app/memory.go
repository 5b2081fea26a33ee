package app

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rath-run/rath/pkg/memory"
	"github.com/rath-run/rath/pkg/memory/pgmem"
	"github.com/rath-run/rath/pkg/memory/sqlitemem"
)

// MemoryPath returns where the memory store of an embedded store URL
// lives: memory.db beside the store's file (so .rath/memory.db under
// rathctl dev), or ":memory:" for an in-memory store; "" for other URLs.
func MemoryPath(storeURL string) string {
	p, ok := strings.CutPrefix(storeURL, "sqlite:")
	if !ok {
		return ""
	}
	p = strings.TrimPrefix(p, "//")
	if p == ":memory:" {
		return p
	}
	return sqlitemem.DefaultPath(filepath.Dir(p))
}

// openMemory opens the memory store beside the session store: its own
// SQLite file for an embedded store (migrated on open), the same Postgres
// database otherwise (whose migrations the coordinator applies).
func openMemory(ctx context.Context, storeURL string) (memory.Store, error) {
	if p := MemoryPath(storeURL); p != "" {
		st, err := sqlitemem.Open(ctx, p)
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	pool, err := pgxpool.New(ctx, storeURL)
	if err != nil {
		return nil, fmt.Errorf("open memory store: %w", err)
	}
	return pgmem.New(pool), nil
}
