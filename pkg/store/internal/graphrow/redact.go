package graphrow

import (
	"context"
	"fmt"
)

// Redaction checks (migration 00014): a chunk row holding a redaction
// marker must keep its own hash in the marker and have a redactions row
// for that hash, so a marker set by hand past the triggers is reported.
const (
	UnrecordedRedactionsPostgres = `SELECT c.version_id::text, c.ord FROM chunks c
	WHERE starts_with(c.payload, '{"rath_redacted":')
	  AND NOT EXISTS (SELECT 1 FROM redactions r WHERE r.hash = c.hash)
	ORDER BY 1, 2`
	UnrecordedRedactionsSQLite = `SELECT c.version_id, c.ord FROM chunks c
	WHERE substr(c.payload, 1, 17) = '{"rath_redacted":'
	  AND NOT EXISTS (SELECT 1 FROM redactions r WHERE r.hash = c.hash)
	ORDER BY 1, 2`
)

// Rows is the part of a query result CheckRedactions reads.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// CheckRedactions adds a problem per row of rows (version_id, ord): a
// chunk row with a redaction marker no redaction recorded. (A marker whose
// hash is not the row's already fails Add's hash check.)
func (c *Checker) CheckRedactions(_ context.Context, rows Rows) error {
	for rows.Next() {
		var id string
		var ord int
		if err := rows.Scan(&id, &ord); err != nil {
			return fmt.Errorf("check redactions: %w", err)
		}
		c.problem("version %s: chunk %d: redaction marker with no redactions row for its hash (not redacted by rath_redact)", id, ord)
	}
	return rows.Err()
}

// Purge drops every cached version and transcript. A redaction changes
// stored chunks (their content, never their hash), so the process that
// redacts purges its cache.
func (c *Cache) Purge() {
	if c == nil {
		return
	}
	if c.versions != nil {
		c.versions.Purge()
	}
	if c.transcripts != nil {
		c.transcripts.Purge()
	}
}
