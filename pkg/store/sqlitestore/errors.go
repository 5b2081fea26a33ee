package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/rath-run/rath/pkg/session"
)

// translate maps a database/sql or SQLite error onto the session sentinels.
func translate(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", op, err)
	}
	for _, s := range []error{session.ErrNotFound, session.ErrConflict, session.ErrUnavailable, session.ErrInvalidID,
		session.ErrHashMismatch, session.ErrInvalidVersion, session.ErrTooLarge} {
		if errors.Is(err, s) {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", op, session.ErrNotFound)
	}
	if errors.Is(err, sql.ErrConnDone) || errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("%s: %w: %v", op, session.ErrUnavailable, err) //nolint:errorlint // the driver stays behind the seam
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch code := se.Code(); {
		case code == sqlite3.SQLITE_CONSTRAINT_UNIQUE || code == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return fmt.Errorf("%s: %w: %s", op, session.ErrConflict, se.Error())
		case code == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			return fmt.Errorf("%s: %w: %s", op, session.ErrNotFound, se.Error())
		case code&0xff == sqlite3.SQLITE_BUSY, code&0xff == sqlite3.SQLITE_LOCKED, code&0xff == sqlite3.SQLITE_CANTOPEN,
			code&0xff == sqlite3.SQLITE_IOERR, code&0xff == sqlite3.SQLITE_NOTADB, code&0xff == sqlite3.SQLITE_FULL,
			code&0xff == sqlite3.SQLITE_READONLY:
			return fmt.Errorf("%s: %w: %s", op, session.ErrUnavailable, se.Error())
		}
		return fmt.Errorf("%s: sqlite: %s", op, se.Error())
	}
	if err.Error() == "sql: database is closed" {
		return fmt.Errorf("%s: %w: store is closed", op, session.ErrUnavailable)
	}
	return fmt.Errorf("%s: sqlite: %v", op, err) //nolint:errorlint // the driver stays behind the seam
}

// isBusy reports whether err is SQLite's SQLITE_BUSY (any extended code):
// another connection holds the lock err's statement needed.
func isBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}
