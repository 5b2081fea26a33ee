package lineage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rath-run/rath/pkg/session"
)

// Dialect names the SQL database a Retention works on.
type Dialect string

// Dialects.
const (
	Postgres Dialect = "postgres"
	SQLite   Dialect = "sqlite"
)

// DialectOf returns the dialect of a store URL.
func DialectOf(url string) (Dialect, error) {
	switch {
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return Postgres, nil
	case strings.HasPrefix(url, "sqlite:"):
		return SQLite, nil
	}
	return "", fmt.Errorf("store URL %q: want postgres://… or sqlite:PATH", url)
}

// Retention prunes what nothing keeps and manages pins, over the store's
// database (migration 00012). A version is kept when it is pinned, is a
// run's or a step's input or output, wrote a memory item (so memory's
// provenance stays resolvable), was created at or after the keep horizon,
// or is a parent or base of a kept version; everything else is deleted
// with its chunks and lineage edges.
//
// Deleting is the one path past the append-only triggers: on Postgres the
// SECURITY DEFINER function rath_gc, owned by the NOLOGIN role rath_gc
// (the triggers let DELETE through only for that role); on SQLite a marker
// row that exists only inside GC's own write transaction.
//
// Caches: stores keep versions in process. GC deletes only versions older
// than the horizon that nothing references, so a running process may still
// serve such a version from its cache until it is evicted: that is harmless
// (versions are immutable, and the cached copy is what was stored), and a
// write on top of a deleted version fails because its parent row is gone.
// Pick a horizon longer than any run or session you still work on.
type Retention struct {
	DB      *sql.DB
	Dialect Dialect
}

// GCReport is what GC freed (or would free, on a dry run).
type GCReport struct {
	Versions int64 `json:"versions"`
	Chunks   int64 `json:"chunks"`
	Edges    int64 `json:"edges"`
	// Bytes is the stored size of the freed rows (Postgres: pg_column_size
	// of each row; SQLite: the length of each row's text and blob columns).
	Bytes  int64 `json:"bytes"`
	DryRun bool  `json:"dry_run,omitempty"`
}

// GC deletes every version (with its chunks and edges) nothing keeps,
// where versions created at or after keepSince are kept.
func (r Retention) GC(ctx context.Context, keepSince time.Time, dryRun bool) (GCReport, error) {
	rep := GCReport{DryRun: dryRun}
	switch r.Dialect {
	case Postgres:
		err := r.DB.QueryRowContext(ctx, `SELECT freed_versions, freed_chunks, freed_edges, freed_bytes FROM rath_gc($1, $2)`,
			keepSince.UTC(), dryRun).Scan(&rep.Versions, &rep.Chunks, &rep.Edges, &rep.Bytes)
		if err != nil {
			return GCReport{}, fmt.Errorf("lineage: gc: %w", err)
		}
		return rep, nil
	case SQLite:
		return r.gcSQLite(ctx, keepSince, dryRun)
	}
	return GCReport{}, fmt.Errorf("lineage: gc: unknown dialect %q", r.Dialect)
}

// sqliteKept is the set of versions GC keeps in the embedded store.
const sqliteKept = `
WITH RECURSIVE kept(id) AS (
    SELECT version_id FROM pins
    UNION SELECT input_id FROM runs
    UNION SELECT output_id FROM runs WHERE output_id IS NOT NULL
    UNION SELECT input_id FROM steps
    UNION SELECT output_id FROM steps WHERE output_id IS NOT NULL
    UNION SELECT id FROM versions WHERE created_at >= ?
    UNION SELECT version_id FROM memory_items WHERE version_id <> ''
    UNION SELECT l.parent_id FROM kept k JOIN lineage l ON l.child_id = k.id
    UNION SELECT v.base_id FROM kept k JOIN versions v ON v.id = k.id WHERE v.base_id IS NOT NULL
)`

func (r Retention) gcSQLite(ctx context.Context, keepSince time.Time, dryRun bool) (GCReport, error) {
	rep := GCReport{DryRun: dryRun}
	tx, err := r.DB.BeginTx(ctx, nil)
	if err != nil {
		return rep, fmt.Errorf("lineage: gc: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	since := keepSince.UTC().Format("2006-01-02T15:04:05.000000000Z")
	if _, err := tx.ExecContext(ctx, `CREATE TEMP TABLE IF NOT EXISTS rath_gc_doomed (id TEXT PRIMARY KEY)`); err != nil {
		return rep, fmt.Errorf("lineage: gc: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM rath_gc_doomed`); err != nil {
		return rep, fmt.Errorf("lineage: gc: %w", err)
	}
	if _, err := tx.ExecContext(ctx, sqliteKept+` INSERT INTO rath_gc_doomed SELECT id FROM versions WHERE id NOT IN (SELECT id FROM kept)`, since); err != nil {
		return rep, fmt.Errorf("lineage: gc: find unkept versions: %w", err)
	}
	var vb, cb, eb int64
	err = tx.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM versions WHERE id IN (SELECT id FROM rath_gc_doomed)),
		(SELECT coalesce(sum(length(id) + coalesce(length(base_id), 0) + length(op) + length(placement) + length(extras) +
		     coalesce(length(run), 0) + coalesce(length(step), 0) + coalesce(length(agent), 0) + coalesce(length(model), 0) +
		     coalesce(length(worker), 0) + coalesce(length(trace_id), 0) + coalesce(length(key), 0) + length(created_at) +
		     length(hash) + length(lane) + 40), 0) FROM versions WHERE id IN (SELECT id FROM rath_gc_doomed)),
		(SELECT count(*) FROM chunks WHERE version_id IN (SELECT id FROM rath_gc_doomed)),
		(SELECT coalesce(sum(length(version_id) + length(lane) + length(kind) + length(payload) + length(hash) + 8), 0)
		     FROM chunks WHERE version_id IN (SELECT id FROM rath_gc_doomed)),
		(SELECT count(*) FROM lineage WHERE child_id IN (SELECT id FROM rath_gc_doomed)),
		(SELECT coalesce(sum(length(child_id) + length(parent_id) + length(op) + 8), 0)
		     FROM lineage WHERE child_id IN (SELECT id FROM rath_gc_doomed))`).Scan(&rep.Versions, &vb, &rep.Chunks, &cb, &rep.Edges, &eb)
	if err != nil {
		return rep, fmt.Errorf("lineage: gc: measure: %w", err)
	}
	rep.Bytes = vb + cb + eb
	if dryRun || rep.Versions == 0 {
		return rep, tx.Commit()
	}
	for _, q := range []string{
		`INSERT INTO rath_gc_running (token) VALUES (1)`,
		`DELETE FROM lineage WHERE child_id IN (SELECT id FROM rath_gc_doomed)`,
		`DELETE FROM chunks WHERE version_id IN (SELECT id FROM rath_gc_doomed)`,
		`DELETE FROM versions WHERE id IN (SELECT id FROM rath_gc_doomed)`,
		`DELETE FROM rath_gc_running`,
		`DELETE FROM rath_gc_doomed`,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return GCReport{}, fmt.Errorf("lineage: gc: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return GCReport{}, fmt.Errorf("lineage: gc: commit: %w", err)
	}
	return rep, nil
}

// Pin keeps id (and everything it descends from) through GC. Pinning a
// pinned version replaces its note.
func (r Retention) Pin(ctx context.Context, id session.ID, note string) error {
	q := `INSERT INTO pins (version_id, note, created_at) VALUES ($1, $2, $3)
		ON CONFLICT (version_id) DO UPDATE SET note = excluded.note`
	now := any(time.Now().UTC())
	if r.Dialect == SQLite {
		q = strings.NewReplacer("$1", "?", "$2", "?", "$3", "?").Replace(q)
		now = time.Now().UTC().Format("2006-01-02T15:04:05.000000000Z")
	}
	if _, err := r.DB.ExecContext(ctx, q, id.String(), note, now); err != nil {
		if strings.Contains(err.Error(), "foreign key") || strings.Contains(err.Error(), "FOREIGN KEY") {
			return fmt.Errorf("pin %s: %w", id, session.ErrNotFound)
		}
		return fmt.Errorf("pin %s: %w", id, err)
	}
	return nil
}

// ErrNotPinned means Unpin found no pin.
var ErrNotPinned = errors.New("rath: version is not pinned")

// Unpin removes id's pin.
func (r Retention) Unpin(ctx context.Context, id session.ID) error {
	q := `DELETE FROM pins WHERE version_id = $1`
	if r.Dialect == SQLite {
		q = `DELETE FROM pins WHERE version_id = ?`
	}
	res, err := r.DB.ExecContext(ctx, q, id.String())
	if err != nil {
		return fmt.Errorf("unpin %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("unpin %s: %w", id, ErrNotPinned)
	}
	return nil
}

// Pins lists the pinned versions, oldest pin first.
func (r Retention) Pins(ctx context.Context) ([]Pin, error) {
	rows, err := r.DB.QueryContext(ctx, `SELECT version_id, note FROM pins ORDER BY created_at, version_id`)
	if err != nil {
		return nil, fmt.Errorf("pins: %w", err)
	}
	defer rows.Close()
	var out []Pin
	for rows.Next() {
		var id, note string
		if err := rows.Scan(&id, &note); err != nil {
			return nil, fmt.Errorf("pins: %w", err)
		}
		vid, err := session.ParseID(id)
		if err != nil {
			return nil, fmt.Errorf("pins: %w", err)
		}
		out = append(out, Pin{ID: vid, Note: note})
	}
	return out, rows.Err()
}

// Pin is one pinned version.
type Pin struct {
	ID   session.ID `json:"id"`
	Note string     `json:"note,omitempty"`
}
