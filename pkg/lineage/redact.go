package lineage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os/user"
	"strings"
	"time"

	"github.com/rath-run/rath/pkg/session"
)

// Redaction is one chunk row whose content a redaction removed.
type Redaction struct {
	// Version and Ord name the chunk row (chunks.version_id, chunks.ord).
	Version session.ID `json:"version"`
	Ord     int        `json:"ord"`
	// Hash is the chunk's hash, which the row keeps.
	Hash   string    `json:"hash"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
	// By is the database user (Postgres session_user) or, on SQLite, the
	// operating system user that redacted.
	By string `json:"by"`
}

// ErrAlreadyRedacted means the chunk was redacted before.
var ErrAlreadyRedacted = errors.New("rath: chunk is already redacted")

// markerPrefix starts every redaction marker payload (session.Redact).
const markerPrefix = `{"rath_redacted":`

// Redact removes the content of chunk ord of version's transcript while
// keeping its hash (migration 00014): the chunk row that stores it (in
// version or the base it extends) and every other row holding the same
// chunk (same hash: a merge stores copies) get the marker payload of
// [session.Redact], and each is recorded in the redactions table. The
// marker's exact bytes are recorded too, in redaction_markers (migration
// 00017): only its hash is covered by the version hashes, and Verify
// reports a marker that is not the one recorded (its reason, tool names or
// call ids rewritten past the triggers). Every version hash still verifies.
// It returns the rows redacted.
//
// It is the one path allowed to UPDATE graph rows: on Postgres through the
// SECURITY DEFINER function rath_redact, owned by the NOLOGIN role
// rath_redact; on SQLite a marker row that exists only inside Redact's own
// write transaction.
//
// Every insert into redactions bumps the redaction epoch (migration 00018)
// in the same transaction, and every store reads that epoch before serving
// content from its in-process cache, dropping the cache when it changed: as
// soon as Redact returns, no process on this database (coordinators,
// workers, rathctl) serves the erased content. On a schema before 00018 the
// stores do not serve content from their caches at all.
func (r Retention) Redact(ctx context.Context, version session.ID, ord int, reason string) ([]Redaction, error) {
	if ord < 0 {
		return nil, fmt.Errorf("redact %s: --chunk %d: ord must be >= 0", version, ord)
	}
	if strings.TrimSpace(reason) == "" {
		return nil, fmt.Errorf("redact %s chunk %d: a reason is required", version, ord)
	}
	owner, kind, payload, err := r.storedChunk(ctx, version, ord)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(payload, markerPrefix) {
		return nil, fmt.Errorf("redact %s chunk %d: %w", version, ord, ErrAlreadyRedacted)
	}
	c, err := session.ChunkFromCanonical(session.Kind(kind), []byte(payload))
	if err != nil {
		return nil, fmt.Errorf("redact %s chunk %d: stored chunk: %w", version, ord, err)
	}
	red, err := session.Redact(c, reason)
	if err != nil {
		return nil, fmt.Errorf("redact %s chunk %d: %w", version, ord, err)
	}
	switch r.Dialect {
	case Postgres:
		return r.redactPostgres(ctx, owner, ord, reason, string(red.Payload()))
	case SQLite:
		return r.redactSQLite(ctx, owner, ord, red)
	}
	return nil, fmt.Errorf("redact: unknown dialect %q", r.Dialect)
}

// storedChunk finds the version that stores chunk ord of version's
// transcript, walking bases, and reads the row.
func (r Retention) storedChunk(ctx context.Context, version session.ID, ord int) (session.ID, string, string, error) {
	q := r.q
	cur := version
	for range maxWalk {
		var base sql.NullString
		var n, own int
		err := r.DB.QueryRowContext(ctx, q(`SELECT base_id, len, own_count FROM versions WHERE id = $1`), cur.String()).Scan(&base, &n, &own)
		if errors.Is(err, sql.ErrNoRows) {
			return session.ID{}, "", "", fmt.Errorf("redact %s: version %s: %w", version, cur, session.ErrNotFound)
		}
		if err != nil {
			return session.ID{}, "", "", fmt.Errorf("redact %s: %w", version, err)
		}
		if cur == version && ord >= n {
			return session.ID{}, "", "", fmt.Errorf("redact %s: --chunk %d: the transcript has %d chunks (0 to %d)", version, ord, n, n-1)
		}
		if ord >= n-own {
			var kind, payload string
			err := r.DB.QueryRowContext(ctx, q(`SELECT kind, payload FROM chunks WHERE version_id = $1 AND ord = $2`), cur.String(), ord).Scan(&kind, &payload)
			if err != nil {
				return session.ID{}, "", "", fmt.Errorf("redact %s: chunk row (%s, %d): %w", version, cur, ord, err)
			}
			return cur, kind, payload, nil
		}
		if !base.Valid {
			break
		}
		next, err := session.ParseID(base.String)
		if err != nil {
			return session.ID{}, "", "", fmt.Errorf("redact %s: base of %s: %w", version, cur, err)
		}
		cur = next
	}
	return session.ID{}, "", "", fmt.Errorf("redact %s: chunk %d: no stored row (the base chain ends first)", version, ord)
}

// q rewrites $n placeholders for SQLite.
func (r Retention) q(s string) string {
	if r.Dialect != SQLite {
		return s
	}
	for i := 9; i >= 1; i-- {
		s = strings.ReplaceAll(s, fmt.Sprintf("$%d", i), "?")
	}
	return s
}

func (r Retention) redactPostgres(ctx context.Context, owner session.ID, ord int, reason, marker string) ([]Redaction, error) {
	rows, err := r.DB.QueryContext(ctx, `SELECT version_id, ord, hash FROM rath_redact($1, $2, $3, $4)`, owner.String(), ord, reason, marker)
	if err != nil {
		return nil, fmt.Errorf("redact %s chunk %d: %w", owner, ord, err)
	}
	defer rows.Close()
	var done []Redaction
	for rows.Next() {
		var id, hash string
		var o int
		if err := rows.Scan(&id, &o, &hash); err != nil {
			return nil, fmt.Errorf("redact %s chunk %d: %w", owner, ord, err)
		}
		vid, err := session.ParseID(id)
		if err != nil {
			return nil, fmt.Errorf("redact %s chunk %d: %w", owner, ord, err)
		}
		done = append(done, Redaction{Version: vid, Ord: o, Hash: hash, Reason: reason})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("redact %s chunk %d: %w", owner, ord, err)
	}
	return r.fill(ctx, done)
}

func (r Retention) redactSQLite(ctx context.Context, owner session.ID, ord int, red session.Chunk) ([]Redaction, error) {
	by := "unknown"
	if u, err := user.Current(); err == nil {
		by = u.Username
	}
	now := time.Now().UTC().Format("2006-01-02T15:04:05.000000000Z")
	tx, err := r.DB.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("redact %s chunk %d: %w", owner, ord, err)
	}
	defer func() { _ = tx.Rollback() }()
	done, err := sqliteCopies(ctx, tx, red, by)
	if err != nil {
		return nil, fmt.Errorf("redact %s chunk %d: %w", owner, ord, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO rath_redact_running (token) VALUES (1)`); err != nil {
		return nil, fmt.Errorf("redact %s chunk %d: %w", owner, ord, err)
	}
	for _, d := range done {
		if _, err := tx.ExecContext(ctx, `UPDATE chunks SET payload = ? WHERE version_id = ? AND ord = ?`, string(red.Payload()), d.Version.String(), d.Ord); err != nil {
			return nil, fmt.Errorf("redact chunk row (%s, %d): %w", d.Version, d.Ord, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO redactions (version_id, ord, hash, reason, redacted_at, redacted_by) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT DO NOTHING`, d.Version.String(), d.Ord, d.Hash, d.Reason, now, by); err != nil {
			return nil, fmt.Errorf("record redaction of (%s, %d): %w", d.Version, d.Ord, err)
		}
	}
	// Migration 00017: the marker's exact bytes, which Verify compares.
	if _, err := tx.ExecContext(ctx, `INSERT INTO redaction_markers (hash, marker) SELECT ?, ?
		WHERE NOT EXISTS (SELECT 1 FROM redaction_markers WHERE hash = ? AND marker = ?)`,
		red.Hash(), string(red.Payload()), red.Hash(), string(red.Payload())); err != nil {
		return nil, fmt.Errorf("record the redaction marker of %s chunk %d: %w", owner, ord, err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM rath_redact_running`); err != nil {
		return nil, fmt.Errorf("redact %s chunk %d: %w", owner, ord, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("redact %s chunk %d: commit: %w", owner, ord, err)
	}
	return r.fill(ctx, done)
}

// fill reads back the recorded time and user of done's redactions.
func (r Retention) fill(ctx context.Context, done []Redaction) ([]Redaction, error) {
	all, err := r.Redactions(ctx)
	if err != nil {
		return done, err
	}
	type key struct {
		id  session.ID
		ord int
	}
	rec := make(map[key]Redaction, len(all))
	for _, a := range all {
		rec[key{a.Version, a.Ord}] = a
	}
	for i, d := range done {
		if a, ok := rec[key{d.Version, d.Ord}]; ok {
			done[i] = a
		}
	}
	return done, nil
}

// Redactions lists every recorded redaction, oldest first.
func (r Retention) Redactions(ctx context.Context) ([]Redaction, error) {
	rows, err := r.DB.QueryContext(ctx, `SELECT version_id, ord, hash, reason, redacted_at, redacted_by FROM redactions ORDER BY redacted_at, version_id, ord`)
	if err != nil {
		return nil, fmt.Errorf("redactions: %w", err)
	}
	defer rows.Close()
	var out []Redaction
	for rows.Next() {
		var id string
		var d Redaction
		var at any
		if err := rows.Scan(&id, &d.Ord, &d.Hash, &d.Reason, &at, &d.By); err != nil {
			return nil, fmt.Errorf("redactions: %w", err)
		}
		if d.Version, err = session.ParseID(id); err != nil {
			return nil, fmt.Errorf("redactions: %w", err)
		}
		switch t := at.(type) {
		case time.Time:
			d.At = t.UTC()
		case string:
			d.At, _ = time.Parse(time.RFC3339Nano, t)
		case []byte:
			d.At, _ = time.Parse(time.RFC3339Nano, string(t))
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// CheckRedactions lists the chunk rows that hold a redaction marker no
// redaction recorded: a marker whose hash is not the row's, a row with no
// redactions entry for its hash (setting the marker by hand, past the
// triggers, does not pass for a redaction), or, from migration 00017, a
// marker whose bytes are not the ones recorded when it was redacted (its
// reason, tool names or call ids edited by hand). The stores' Verify runs
// the same checks.
func (r Retention) CheckRedactions(ctx context.Context) ([]Problem, error) {
	markers, err := r.hasTable(ctx, "redaction_markers")
	if err != nil {
		return nil, fmt.Errorf("check redactions: %w", err)
	}
	query := UnrecordedRedactionsSQL(r.Dialect)
	if markers {
		query = CheckRedactionsSQL(r.Dialect)
	}
	rows, err := r.DB.QueryContext(ctx, r.q(query))
	if err != nil {
		return nil, fmt.Errorf("check redactions: %w", err)
	}
	defer rows.Close()
	var out []Problem
	for rows.Next() {
		var id, detail string
		var ord int
		if err := rows.Scan(&id, &ord, &detail); err != nil {
			return nil, fmt.Errorf("check redactions: %w", err)
		}
		vid, err := session.ParseID(id)
		if err != nil {
			return nil, fmt.Errorf("check redactions: %w", err)
		}
		out = append(out, Problem{Table: "chunks", ID: vid, Ord: ord, Column: "payload", Detail: detail})
	}
	return out, rows.Err()
}

// UnrecordedRedactionsSQL is the query CheckRedactions runs: one row
// (version_id, ord, detail) per chunk row holding a redaction marker that
// no redaction recorded.
func UnrecordedRedactionsSQL(d Dialect) string {
	hash := `c.payload::jsonb -> 'rath_redacted' ->> 'hash'`
	prefix := `starts_with(c.payload, '{"rath_redacted":')`
	id := `c.version_id::text`
	if d == SQLite {
		hash = `json_extract(c.payload, '$.rath_redacted.hash')`
		prefix = `substr(c.payload, 1, 17) = '{"rath_redacted":'`
		id = `c.version_id`
	}
	return `SELECT ` + id + `, c.ord, CASE WHEN ` + hash + ` IS DISTINCT FROM c.hash
	        THEN 'redaction marker keeps a hash that is not the row''s'
	        ELSE 'redaction marker with no redactions row for its hash (not redacted by rath_redact)' END
	FROM chunks c
	WHERE ` + prefix + `
	  AND (` + hash + ` IS DISTINCT FROM c.hash OR NOT EXISTS (SELECT 1 FROM redactions r WHERE r.hash = c.hash))
	ORDER BY 1, 2`
}

// CheckRedactionsSQL is the query CheckRedactions runs on a schema with
// migration 00017: UnrecordedRedactionsSQL's rows, and also one per chunk
// row whose marker is recorded for its hash but whose bytes are not the
// marker that redaction wrote (redaction_markers): its reason, a tool name
// or a call id was changed past the triggers.
func CheckRedactionsSQL(d Dialect) string {
	hash := `c.payload::jsonb -> 'rath_redacted' ->> 'hash'`
	prefix := `starts_with(c.payload, '{"rath_redacted":')`
	id := `c.version_id::text`
	if d == SQLite {
		hash = `json_extract(c.payload, '$.rath_redacted.hash')`
		prefix = `substr(c.payload, 1, 17) = '{"rath_redacted":'`
		id = `c.version_id`
	}
	recorded := `EXISTS (SELECT 1 FROM redactions r WHERE r.hash = c.hash)`
	exact := `EXISTS (SELECT 1 FROM redaction_markers m WHERE m.hash = c.hash AND m.marker = c.payload)`
	return `SELECT ` + id + `, c.ord, CASE WHEN ` + hash + ` IS DISTINCT FROM c.hash
	        THEN 'redaction marker keeps a hash that is not the row''s'
	        WHEN NOT ` + recorded + `
	        THEN 'redaction marker with no redactions row for its hash (not redacted by rath_redact)'
	        ELSE 'redaction marker is not the one recorded when it was redacted (its reason, a tool name or a call id was changed past rath_redact)' END
	FROM chunks c
	WHERE ` + prefix + `
	  AND (` + hash + ` IS DISTINCT FROM c.hash OR NOT ` + recorded + ` OR NOT ` + exact + `)
	ORDER BY 1, 2`
}

// hasTable reports whether the schema has table name.
func (r Retention) hasTable(ctx context.Context, name string) (bool, error) {
	q := `SELECT to_regclass($1) IS NOT NULL`
	if r.Dialect == SQLite {
		q = `SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = ?`
	}
	var ok bool
	if err := r.DB.QueryRowContext(ctx, q, name).Scan(&ok); err != nil {
		return false, err
	}
	return ok, nil
}

// sqliteCopies lists the unredacted chunk rows holding red's chunk.
func sqliteCopies(ctx context.Context, tx *sql.Tx, red session.Chunk, by string) ([]Redaction, error) {
	rows, err := tx.QueryContext(ctx, `SELECT version_id, ord FROM chunks WHERE hash = ? AND kind = ? AND substr(payload, 1, 17) <> '{"rath_redacted":' ORDER BY version_id, ord`,
		red.Hash(), string(red.Kind()))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var done []Redaction
	for rows.Next() {
		var id string
		var o int
		if err := rows.Scan(&id, &o); err != nil {
			return nil, err
		}
		vid, err := session.ParseID(id)
		if err != nil {
			return nil, err
		}
		done = append(done, Redaction{Version: vid, Ord: o, Hash: red.Hash(), Reason: red.RedactionReason(), By: by})
	}
	return done, rows.Err()
}
