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

	// AlteredRedactionsPostgres and AlteredRedactionsSQLite (migration
	// 00017) list the chunk rows (version_id, ord) whose redaction marker is
	// recorded for its hash but whose bytes are not the marker rath_redact
	// wrote (redaction_markers): the reason, a tool name or a call id was
	// changed past the triggers. Only the hash is covered by the version
	// hashes, so this record is what covers the rest of the marker.
	AlteredRedactionsPostgres = `SELECT c.version_id::text, c.ord FROM chunks c
	WHERE starts_with(c.payload, '{"rath_redacted":')
	  AND EXISTS (SELECT 1 FROM redactions r WHERE r.hash = c.hash)
	  AND NOT EXISTS (SELECT 1 FROM redaction_markers m WHERE m.hash = c.hash AND m.marker = c.payload)
	ORDER BY 1, 2`
	AlteredRedactionsSQLite = `SELECT c.version_id, c.ord FROM chunks c
	WHERE substr(c.payload, 1, 17) = '{"rath_redacted":'
	  AND EXISTS (SELECT 1 FROM redactions r WHERE r.hash = c.hash)
	  AND NOT EXISTS (SELECT 1 FROM redaction_markers m WHERE m.hash = c.hash AND m.marker = c.payload)
	ORDER BY 1, 2`
)

// AlteredMarker is the problem CheckAlteredRedactions reports.
const AlteredMarker = "redaction marker is not the one recorded when it was redacted (its reason, a tool name or a call id was changed past rath_redact)"

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

// CheckAlteredRedactions adds a problem per row of rows (version_id, ord)
// from AlteredRedactionsPostgres or AlteredRedactionsSQLite.
func (c *Checker) CheckAlteredRedactions(_ context.Context, rows Rows) error {
	for rows.Next() {
		var id string
		var ord int
		if err := rows.Scan(&id, &ord); err != nil {
			return fmt.Errorf("check redaction markers: %w", err)
		}
		c.problem("version %s: chunk %d: %s", id, ord, AlteredMarker)
	}
	return rows.Err()
}

// Purge drops every cached version and transcript. Adds made with an
// epoch taken before the purge are dropped too.
func (c *Cache) Purge() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.purgeLocked()
	c.known = false
}

func (c *Cache) purgeLocked() {
	c.gen++
	if c.versions != nil {
		c.versions.Purge()
	}
	if c.transcripts != nil {
		c.transcripts.Purge()
	}
}
