//go:build unix

package sqlitestore

import (
	"fmt"
	"os"
	"syscall"
)

// lockMigrations takes an exclusive lock on a file beside the database, so
// processes migrating one database at once take turns, as Postgres's
// advisory lock makes them do. Goose plans a run before applying it, and a
// migration a second process applies again may succeed (00009 rebuilds the
// runs table): each process must see the others' work before it plans.
func lockMigrations(path string) (unlock func(), err error) {
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
