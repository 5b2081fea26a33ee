// Package sqlitemem is the embedded memory backend: one SQLite file
// (modernc.org/sqlite), migrated with Rath's embedded SQLite migrations.
// `memory: local` in an agent spec opens [DefaultPath] under the dev
// state directory, so items persist across runs.
package sqlitemem

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // database/sql driver "sqlite"

	"github.com/rath-run/rath/internal/migratelock"
	"github.com/rath-run/rath/migrations"
	"github.com/rath-run/rath/pkg/memory/internal/sqlmem"
)

// DefaultFile is the memory database's file name inside a state directory
// (rathctl dev: .rath/memory.db).
const DefaultFile = "memory.db"

// DefaultPath returns the memory database path in stateDir.
func DefaultPath(stateDir string) string { return filepath.Join(stateDir, DefaultFile) }

// Store is the embedded memory store.
type Store struct{ *sqlmem.Store }

// Open opens (creating and migrating) the memory database at path, or a
// private in-memory database for ":memory:".
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("open memory store: empty path")
	}
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open memory store: path %q must not contain '?' or '#'", path)
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	if path != ":memory:" {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("open memory store: %w", err)
		}
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(NORMAL)")
	}
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open memory store %s: %w", path, err)
	}
	// One connection: SQLite has one writer, and ":memory:" is per connection.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	if err := migrate(ctx, db, path); err != nil {
		db.Close()
		return nil, fmt.Errorf("open memory store %s: %w", path, err)
	}
	return &Store{sqlmem.New(db, false, db.Close)}, nil
}

// migrate applies the embedded migrations under the migration lock beside
// the file (the session store's lock, package migratelock): a coordinator
// and a worker opening a fresh memory.db at once take turns instead of both
// applying migration 1.
func migrate(ctx context.Context, db *sql.DB, path string) error {
	if path != ":memory:" {
		unlock, err := migratelock.Lock(path)
		if err != nil {
			return err
		}
		defer unlock()
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, migrations.SQLite(), goose.WithDisableGlobalRegistry(true))
	if err == nil {
		_, err = p.Up(ctx)
	}
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
