package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/store/internal/graphrow"
)

func depthLimit(maxDepth int) int {
	if maxDepth <= 0 || maxDepth > math.MaxInt32 {
		return math.MaxInt32
	}
	return maxDepth
}

// ancestorsSQL walks lanes, not versions (see the Postgres store): an entry
// (lane, hi, d) says the versions of lane at pos <= hi are ancestors at
// depth d + hi - pos; the walk leaves a lane at its start and its merges.
// CROSS JOIN fixes SQLite's join order to entries first. The rows come
// packed in one value, "ID DEPTH OP LEN CREATED_AT SEQ " each, unaggregated,
// with the number of entries: graphrow.Nearest keeps each version's shortest
// depth (only needed with more than one entry) and sorts.
const ancestorsSQL = `
WITH RECURSIVE
start AS (SELECT id, lane, pos FROM versions WHERE id = ?1),
entry(lane, hi, d) AS (
	SELECT s.lane, s.pos - 1, 1 FROM start s WHERE s.pos > 0
	UNION
	SELECT p.lane, p.pos, 1
	FROM start s CROSS JOIN lineage l CROSS JOIN versions p
	WHERE l.child_id = s.id AND p.id = l.parent_id AND (s.pos = 0 OR l.ordinal > 0)
	UNION
	SELECT p.lane, p.pos, e.d + e.hi - x.pos + 1
	FROM entry e CROSS JOIN versions x CROSS JOIN lineage l CROSS JOIN versions p
	WHERE x.lane = e.lane AND x.pos <= e.hi AND (x.pos = 0 OR x.parent_count > 1)
	  AND l.child_id = x.id AND (x.pos = 0 OR l.ordinal > 0) AND p.id = l.parent_id
	  AND e.d + e.hi - x.pos + 1 <= ?2
)
SELECT count(*), (SELECT count(*) FROM entry),
	group_concat(x.id || ' ' || (e.d + e.hi - x.pos) || ' ' || x.op || ' ' || x.len || ' ' || x.created_at || ' ' || x.seq || ' ', '')
FROM entry e CROSS JOIN versions x
WHERE x.lane = e.lane AND x.pos <= e.hi AND x.pos >= e.hi - (?2 - e.d)`

// The descendant walk uses UNION, so a (version, depth) pair is expanded
// once; the outer query keeps each version's shortest distance.
const descendantsSQL = `
WITH RECURSIVE walk(id, depth) AS (
	SELECT child_id, 1 FROM lineage WHERE parent_id = ?1
	UNION
	SELECT l.child_id, walk.depth + 1 FROM walk JOIN lineage l ON l.parent_id = walk.id WHERE walk.depth < ?2
)
SELECT v.id, m.depth, v.op, v.len, v.created_at
FROM (SELECT id, min(depth) AS depth FROM walk GROUP BY id) m JOIN versions v ON v.id = m.id
ORDER BY m.depth, v.seq`

// Ancestors implements [store.Store].
func (d *db) Ancestors(ctx context.Context, id session.ID, maxDepth int) ([]store.Relative, error) {
	if _, err := d.Get(ctx, id); err != nil {
		return nil, fmt.Errorf("ancestors: %w", err)
	}
	var n, entries int
	var packed []byte
	if err := d.r.QueryRowContext(ctx, ancestorsSQL, id.String(), depthLimit(maxDepth)).Scan(&n, &entries, &packed); err != nil {
		return nil, translate("ancestors", err)
	}
	reached, err := unpackReached(packed, n)
	if err != nil {
		return nil, fmt.Errorf("ancestors: %w", err)
	}
	return graphrow.Nearest(reached, true, entries <= 1), nil
}

// unpackReached parses ancestorsSQL's n packed rows.
func unpackReached(packed []byte, n int) ([]graphrow.Reached, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: negative row count %d", session.ErrHashMismatch, n)
	}
	out := make([]graphrow.Reached, 0, min(n, len(packed)/64+1)) // a row is ~80 bytes
	var f [6][]byte
	for len(packed) > 0 {
		for i := range f {
			var ok bool
			if f[i], packed, ok = bytes.Cut(packed, []byte{' '}); !ok {
				return nil, fmt.Errorf("%w: stored row %d does not unpack", session.ErrHashMismatch, len(out))
			}
		}
		var r graphrow.Reached
		var err [5]error
		r.ID, err[0] = uuid.ParseBytes(f[0])
		r.Depth, err[1] = strconv.Atoi(string(f[1]))
		r.Op = graphrow.OpOf(f[2])
		r.Len, err[2] = strconv.Atoi(string(f[3]))
		r.CreatedAt, err[3] = parseTime(f[4])
		r.Seq, err[4] = strconv.ParseInt(string(f[5]), 10, 64)
		if e := errors.Join(err[:]...); e != nil {
			return nil, fmt.Errorf("%w: stored row %d: %w", session.ErrHashMismatch, len(out), e)
		}
		out = append(out, r)
	}
	if len(out) != n {
		return nil, fmt.Errorf("%w: %d rows unpacked to %d", session.ErrHashMismatch, n, len(out))
	}
	return out, nil
}

// parseTime parses created_at in timeLayout ("2006-01-02T15:04:05.000000000Z")
// by position, several times faster than time.Parse.
func parseTime(b []byte) (time.Time, error) {
	bad := len(b) != len(timeLayout) || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' ||
		b[16] != ':' || b[19] != '.' || b[29] != 'Z'
	num := func(lo, hi int) int {
		n := 0
		for _, c := range b[lo:hi] {
			if c < '0' || c > '9' {
				bad = true
			}
			n = n*10 + int(c-'0')
		}
		return n
	}
	if bad {
		return time.Time{}, fmt.Errorf("created_at %q is not %s", b, timeLayout)
	}
	t := time.Date(num(0, 4), time.Month(num(5, 7)), num(8, 10), num(11, 13), num(14, 16), num(17, 19), num(20, 29), time.UTC)
	if bad {
		return time.Time{}, fmt.Errorf("created_at %q is not %s", b, timeLayout)
	}
	return t, nil
}

// Descendants implements [store.Store].
func (d *db) Descendants(ctx context.Context, id session.ID, maxDepth int) ([]store.Relative, error) {
	return d.relatives(ctx, "descendants", descendantsSQL, id, maxDepth)
}

func (d *db) relatives(ctx context.Context, op, query string, id session.ID, maxDepth int) ([]store.Relative, error) {
	if _, err := d.Get(ctx, id); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	rows, err := d.r.QueryContext(ctx, query, id.String(), depthLimit(maxDepth))
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	var out []store.Relative
	for rows.Next() {
		var r store.Relative
		var created string
		if err := rows.Scan(&r.ID, &r.Depth, &r.Op, &r.Len, &created); err != nil {
			return nil, translate(op, err)
		}
		if r.CreatedAt, err = time.Parse(timeLayout, created); err != nil {
			return nil, fmt.Errorf("%s: %w: stored created_at %q", op, session.ErrHashMismatch, created)
		}
		out = append(out, r)
	}
	return out, translate(op, rows.Err())
}

// Children implements [store.Store].
func (d *db) Children(ctx context.Context, id session.ID) ([]store.Info, error) {
	if _, err := d.Get(ctx, id); err != nil {
		return nil, fmt.Errorf("children: %w", err)
	}
	rows, err := d.r.QueryContext(ctx, `SELECT `+versionCols+` FROM lineage e JOIN versions v ON v.id = e.child_id
		WHERE e.parent_id = ? ORDER BY v.seq`, id.String())
	if err != nil {
		return nil, translate("children", err)
	}
	defer rows.Close()
	var out []store.Info
	for rows.Next() {
		v, own, err := scanVersion(rows)
		if err != nil {
			return nil, translate("children", err)
		}
		out = append(out, infoOf(v, own))
	}
	return out, translate("children", rows.Err())
}

// List implements [store.Store].
func (d *db) List(ctx context.Context, p store.ListParams) (store.Page, error) {
	after, err := p.Normalize()
	if err != nil {
		return store.Page{}, err
	}
	rows, err := d.r.QueryContext(ctx, `SELECT `+versionCols+`, v.seq FROM versions v
		WHERE v.seq > ?1 AND (NOT ?2 OR v.parent_count = 0) AND (?3 = '' OR v.run = ?3)
		ORDER BY v.seq LIMIT ?4`, after, p.RootsOnly, p.Run, p.Limit+1)
	if err != nil {
		return store.Page{}, translate("list", err)
	}
	defer rows.Close()
	var page store.Page
	var last int64
	for rows.Next() {
		if len(page.Versions) == p.Limit {
			page.Next = store.EncodeCursor(last)
			break
		}
		v, own, err := scanVersion(rows, &last)
		if err != nil {
			return store.Page{}, translate("list", err)
		}
		page.Versions = append(page.Versions, infoOf(v, own))
	}
	return page, translate("list", rows.Err())
}

// Verify implements [store.Store]: it streams every version with its chunk
// rows in commit order and recomputes every hash.
func (s *Store) Verify(ctx context.Context) (store.VerifyReport, error) {
	check := graphrow.NewChecker(store.MaxProblems)
	rows, err := s.readers.QueryContext(ctx, `SELECT `+versionCols+`, c.ord, c.kind, c.payload, c.hash, v.lane, v.pos, c.lane
		FROM versions v LEFT JOIN chunks c ON c.version_id = v.id ORDER BY v.seq, c.ord`)
	if err != nil {
		return store.VerifyReport{}, translate("verify", err)
	}
	defer rows.Close()
	var cur *session.Version
	var curChunks []graphrow.StoredChunk
	var curLane graphrow.LanePos
	var chunkLanes []session.ID
	flush := func() {
		if cur != nil {
			check.Add(cur, curChunks)
			check.CheckLane(cur, curLane, chunkLanes)
		}
	}
	for rows.Next() {
		var ord sql.NullInt64
		var kind, payload, hash, chunkLane sql.NullString
		var lane string
		var pos int
		v, _, err := scanVersion(rows, &ord, &kind, &payload, &hash, &lane, &pos, &chunkLane)
		if err != nil {
			return store.VerifyReport{}, translate("verify", err)
		}
		if cur == nil || cur.ID != v.ID {
			flush()
			cur, curChunks, chunkLanes = v, nil, nil
			curLane = graphrow.LanePos{Pos: pos}
			if curLane.Lane, err = session.ParseID(lane); err != nil {
				check.Problem("version %s: lane %q is not an id", v.ID, lane)
			}
		}
		if ord.Valid {
			curChunks = append(curChunks, graphrow.StoredChunk{Ord: int(ord.Int64), Kind: kind.String, Payload: []byte(payload.String), Hash: hash.String})
			l, err := session.ParseID(chunkLane.String)
			if err != nil {
				check.Problem("version %s: chunk lane %q is not an id", v.ID, chunkLane.String)
			}
			chunkLanes = append(chunkLanes, l)
		}
	}
	if err := rows.Err(); err != nil {
		return store.VerifyReport{}, translate("verify", err)
	}
	flush()
	if err := s.checkRedactions(ctx, check); err != nil {
		return store.VerifyReport{}, err
	}
	rep := store.VerifyReport{Versions: check.Versions, Chunks: check.Chunks, Edges: check.Edges, Problems: check.Problems}
	return rep, check.Err()
}

// checkRedactions reports chunk rows holding a redaction marker that no
// redaction recorded (migration 00014), or whose bytes are not the marker
// recorded when it was redacted (00017); each check is skipped on a schema
// older than its migration.
func (s *Store) checkRedactions(ctx context.Context, check *graphrow.Checker) error {
	var n int
	if err := s.readers.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'redactions'`).Scan(&n); err != nil {
		return translate("verify", err)
	}
	if n == 0 {
		return nil
	}
	rows, err := s.readers.QueryContext(ctx, graphrow.UnrecordedRedactionsSQLite)
	if err != nil {
		return translate("verify", err)
	}
	defer rows.Close()
	if err := check.CheckRedactions(ctx, rows); err != nil {
		return translate("verify", err)
	}
	if err := rows.Err(); err != nil {
		return translate("verify", err)
	}
	if err := rows.Close(); err != nil {
		return translate("verify", err)
	}
	// Migration 00017 records each marker's bytes: a marker edited past
	// the triggers no longer matches.
	if err := s.readers.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'redaction_markers'`).Scan(&n); err != nil {
		return translate("verify", err)
	}
	if n == 0 {
		return nil
	}
	altered, err := s.readers.QueryContext(ctx, graphrow.AlteredRedactionsSQLite)
	if err != nil {
		return translate("verify", err)
	}
	defer altered.Close()
	if err := check.CheckAlteredRedactions(ctx, altered); err != nil {
		return translate("verify", err)
	}
	return translate("verify", altered.Err())
}
