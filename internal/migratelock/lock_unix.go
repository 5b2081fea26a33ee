//go:build unix

// Package migratelock serializes processes migrating one SQLite file: an
// exclusive flock on "<path>.migrate-lock" beside the database, held while
// goose plans and applies. Goose plans a run before applying it, so two
// processes migrating a fresh file at once would both plan the first
// migration and the second would fail ("table … already exists"); with the
// lock each sees the other's work before it plans, as Postgres's advisory
// lock makes them do. The session store (pkg/store/sqlitestore) and the
// memory store (pkg/memory/sqlitemem) both take it.
//
// flock locks belong to an open file description, so two openers in one
// process exclude each other too. Where flock is not available the lock is
// a no-op.
package migratelock

import (
	"fmt"
	"os"
	"syscall"
)

// Lock takes the migration lock of the database at path, waiting for it,
// and returns the function that releases it.
func Lock(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path+".migrate-lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("migrate: lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("migrate: lock %s: %w", f.Name(), err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
