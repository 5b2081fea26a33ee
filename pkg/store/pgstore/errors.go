package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rath-run/rath/pkg/session"
)

// translate maps a pgx error onto the session sentinels, naming op. Context
// errors pass through unchanged: the caller's cancellation is not a store
// failure.
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
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", op, session.ErrNotFound)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "23505":
			return fmt.Errorf("%s: %w: %s", op, session.ErrConflict, pgErr.Message)
		case pgErr.Code == "23503":
			return fmt.Errorf("%s: %w: %s", op, session.ErrNotFound, pgErr.Message)
		case pgErr.Code == "22P02":
			return fmt.Errorf("%s: %w: %s", op, session.ErrInvalidID, pgErr.Message)
		case pgErr.Code[:2] == "08", pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03",
			pgErr.Code == "53300", pgErr.Code == "40001", pgErr.Code == "40P01":
			return fmt.Errorf("%s: %w: %s (%s)", op, session.ErrUnavailable, pgErr.Message, pgErr.Code)
		case pgErr.Code == "3D000", pgErr.Code == "42P01":
			return fmt.Errorf("%s: %w: %s (is the schema migrated?)", op, session.ErrUnavailable, pgErr.Message)
		}
		return fmt.Errorf("%s: postgres: %s (%s)", op, pgErr.Message, pgErr.Code)
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	if errors.As(err, &connErr) || errors.As(err, &netErr) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) ||
		errors.Is(err, net.ErrClosed) || isClosedPool(err) {
		// The driver's error is described, not wrapped: callers branch on
		// the session sentinels, never on pgx types.
		return fmt.Errorf("%s: %w: %v", op, session.ErrUnavailable, err) //nolint:errorlint // see above
	}
	return fmt.Errorf("%s: postgres: %v", op, err) //nolint:errorlint // the driver stays behind the seam
}

func isClosedPool(err error) bool {
	return err != nil && (err.Error() == "closed pool" || err.Error() == "conn closed")
}

// IsUnavailable reports whether err (from this store, or from any pgx or
// database/sql call on Postgres) means the database could not be reached or
// is restarting: a condition to wait out, not a failure of the work.
func IsUnavailable(err error) bool {
	return err != nil && errors.Is(translate("", err), session.ErrUnavailable)
}
