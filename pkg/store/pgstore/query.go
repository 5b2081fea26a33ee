package pgstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

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

// ancestorsSQL walks lanes, not versions. An entry (lane, hi, d) says that
// the versions of lane at pos <= hi are ancestors at depth d + hi - pos; the
// walk leaves a lane only at its start (all parents) and at its merges (the
// parents after the first). The rows come unaggregated, with the number of
// entries: graphrow.Nearest keeps each ancestor's shortest depth and sorts,
// which costs the client less than a GROUP BY and ORDER BY cost the server.
const ancestorsSQL = `
WITH RECURSIVE
start AS (SELECT id, lane, pos FROM versions WHERE id = $1),
entry(lane, hi, d) AS (
	SELECT s.lane, s.pos - 1, 1 FROM start s WHERE s.pos > 0
	UNION
	SELECT p.lane, p.pos, 1
	FROM start s JOIN lineage l ON l.child_id = s.id JOIN versions p ON p.id = l.parent_id
	WHERE s.pos = 0 OR l.ordinal > 0
	UNION
	SELECT p.lane, p.pos, e.d + e.hi - x.pos + 1
	FROM entry e
	JOIN versions x ON x.lane = e.lane AND x.pos <= e.hi AND (x.pos = 0 OR x.parent_count > 1)
	JOIN lineage l ON l.child_id = x.id AND (x.pos = 0 OR l.ordinal > 0)
	JOIN versions p ON p.id = l.parent_id
	WHERE e.d + e.hi - x.pos + 1 <= $2
)
SELECT x.id, (e.d + e.hi - x.pos)::integer AS depth, x.op, x.len, x.created_at, x.created_nanos, x.seq,
	(SELECT count(*) FROM entry) AS entries
FROM entry e JOIN versions x ON x.lane = e.lane AND x.pos <= e.hi AND x.pos >= e.hi - ($2 - e.d)`

// The descendant walk uses UNION, so a (version, depth) pair is expanded
// once; the outer query keeps each version's shortest distance.
const descendantsSQL = `
WITH RECURSIVE walk(id, depth) AS (
	SELECT child_id, 1 FROM lineage WHERE parent_id = $1
	UNION
	SELECT l.child_id, walk.depth + 1 FROM walk JOIN lineage l ON l.parent_id = walk.id WHERE walk.depth < $2
)
SELECT v.id, m.depth, v.op, v.len, v.created_at, v.created_nanos
FROM (SELECT id, min(depth) AS depth FROM walk GROUP BY id) m JOIN versions v ON v.id = m.id
ORDER BY m.depth, v.seq`

// Ancestors implements [store.Store].
func (d *db) Ancestors(ctx context.Context, id session.ID, maxDepth int) ([]store.Relative, error) {
	if _, err := d.Get(ctx, id); err != nil {
		return nil, fmt.Errorf("ancestors: %w", err)
	}
	rows, err := d.q.Query(ctx, ancestorsSQL, id, depthLimit(maxDepth))
	if err != nil {
		return nil, translate("ancestors", err)
	}
	entries := int64(0)
	reached, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (graphrow.Reached, error) {
		fds, raw := row.FieldDescriptions(), row.RawValues()
		if len(fds) == 8 && len(raw) == 8 && isBinaryInt8(fds[6], raw[6]) && isBinaryInt8(fds[7], raw[7]) {
			if rel, ok := decodeRelative(fds[:6], raw[:6]); ok {
				entries = int64(binary.BigEndian.Uint64(raw[7]))
				return graphrow.Reached{Relative: rel, Seq: int64(binary.BigEndian.Uint64(raw[6]))}, nil
			}
		}
		return scanReached(row, &entries)
	})
	if err != nil {
		return nil, translate("ancestors", err)
	}
	return graphrow.Nearest(reached, true, entries <= 1), nil
}

// scanReached scans an ancestorsSQL row that is not in the binary form
// decodeRelative reads (kept apart so the fast path allocates nothing).
func scanReached(row pgx.CollectableRow, entries *int64) (graphrow.Reached, error) {
	var r graphrow.Reached
	var created time.Time
	var nanos int16
	err := row.Scan(&r.ID, &r.Depth, &r.Op, &r.Len, &created, &nanos, &r.Seq, entries)
	r.CreatedAt = created.UTC().Add(time.Duration(nanos))
	return r, err
}

func isBinaryInt8(fd pgconn.FieldDescription, raw []byte) bool {
	return fd.Format == pgx.BinaryFormatCode && fd.DataTypeOID == pgtype.Int8OID && len(raw) == 8
}

// Descendants implements [store.Store].
func (d *db) Descendants(ctx context.Context, id session.ID, maxDepth int) ([]store.Relative, error) {
	return d.relatives(ctx, "descendants", descendantsSQL, id, maxDepth)
}

func (d *db) relatives(ctx context.Context, op, query string, id session.ID, maxDepth int) ([]store.Relative, error) {
	if _, err := d.Get(ctx, id); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	rows, err := d.q.Query(ctx, query, id, depthLimit(maxDepth))
	if err != nil {
		return nil, translate(op, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Relative, error) {
		if r, ok := decodeRelative(row.FieldDescriptions(), row.RawValues()); ok {
			return r, nil
		}
		var r store.Relative
		var created time.Time
		var nanos int16
		err := row.Scan(&r.ID, &r.Depth, &r.Op, &r.Len, &created, &nanos)
		r.CreatedAt = created.UTC().Add(time.Duration(nanos))
		return r, err
	})
	if err != nil {
		return nil, translate(op, err)
	}
	return out, nil
}

// decodeRelative decodes a row of (id uuid, depth int4, op text, len int4,
// created_at timestamptz, created_nanos int2) from the binary wire format
// without allocating (walks return thousands of them); ok is false when the
// row is not in that form, and the caller scans it instead.
func decodeRelative(fds []pgconn.FieldDescription, raw [][]byte) (r store.Relative, ok bool) {
	want := [6]struct {
		oid  uint32
		size int
	}{{pgtype.UUIDOID, 16}, {pgtype.Int4OID, 4}, {pgtype.TextOID, -1}, {pgtype.Int4OID, 4}, {pgtype.TimestamptzOID, 8}, {pgtype.Int2OID, 2}}
	if len(fds) != len(want) || len(raw) != len(want) {
		return r, false
	}
	for i, w := range want {
		// text is its bytes in either format; the others must be binary.
		binaryOrText := fds[i].Format == pgx.BinaryFormatCode || w.oid == pgtype.TextOID
		if !binaryOrText || fds[i].DataTypeOID != w.oid || raw[i] == nil || (w.size >= 0 && len(raw[i]) != w.size) {
			return r, false
		}
	}
	micros := int64(binary.BigEndian.Uint64(raw[4]))
	if micros == math.MaxInt64 || micros == math.MinInt64 { // ±infinity
		return r, false
	}
	r.ID = session.ID(raw[0])
	r.Depth = int(int32(binary.BigEndian.Uint32(raw[1])))
	r.Op = graphrow.OpOf(raw[2])
	r.Len = int(int32(binary.BigEndian.Uint32(raw[3])))
	// timestamptz counts microseconds from 2000-01-01 00:00 UTC.
	r.CreatedAt = time.UnixMicro(postgresEpochMicros + micros).UTC().Add(time.Duration(int16(binary.BigEndian.Uint16(raw[5]))))
	return r, true
}

// postgresEpochMicros is 2000-01-01 00:00 UTC in Unix microseconds.
const postgresEpochMicros = 946_684_800_000_000

// Children implements [store.Store].
func (d *db) Children(ctx context.Context, id session.ID) ([]store.Info, error) {
	if _, err := d.Get(ctx, id); err != nil {
		return nil, fmt.Errorf("children: %w", err)
	}
	rows, err := d.q.Query(ctx, `SELECT `+versionCols+` FROM lineage e JOIN versions v ON v.id = e.child_id
		WHERE e.parent_id = $1 ORDER BY v.seq`, id)
	if err != nil {
		return nil, translate("children", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Info, error) {
		v, own, err := scanVersion(row)
		if err != nil {
			return store.Info{}, err
		}
		return infoOf(v, own), nil
	})
	return out, translate("children", err)
}

// List implements [store.Store].
func (d *db) List(ctx context.Context, p store.ListParams) (store.Page, error) {
	after, err := p.Normalize()
	if err != nil {
		return store.Page{}, err
	}
	rows, err := d.q.Query(ctx, `SELECT `+versionCols+`, v.seq FROM versions v
		WHERE v.seq > $1 AND (NOT $2 OR v.parent_count = 0) AND ($3 = '' OR v.run = $3)
		ORDER BY v.seq LIMIT $4`, after, p.RootsOnly, p.Run, p.Limit+1)
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
		v, own, err := scanVersion(seqRow{rows, &last})
		if err != nil {
			return store.Page{}, translate("list", err)
		}
		page.Versions = append(page.Versions, infoOf(v, own))
	}
	if err := rows.Err(); err != nil {
		return store.Page{}, translate("list", err)
	}
	return page, nil
}

// seqRow scans versionCols followed by seq.
type seqRow struct {
	rows pgx.Rows
	seq  *int64
}

func (r seqRow) Scan(dest ...any) error { return r.rows.Scan(append(dest, r.seq)...) }

// Verify implements [store.Store]: it streams every version with its chunk
// rows in commit order and recomputes every hash.
func (s *Store) Verify(ctx context.Context) (store.VerifyReport, error) {
	parents := make(map[session.ID][]session.ID)
	rows, err := s.pool.Query(ctx, `SELECT child_id, parent_id FROM lineage ORDER BY child_id, ordinal`)
	if err != nil {
		return store.VerifyReport{}, translate("verify", err)
	}
	for rows.Next() {
		var c, p session.ID
		if err := rows.Scan(&c, &p); err != nil {
			rows.Close()
			return store.VerifyReport{}, translate("verify", err)
		}
		parents[c] = append(parents[c], p)
	}
	if err := rows.Err(); err != nil {
		return store.VerifyReport{}, translate("verify", err)
	}
	check := graphrow.NewChecker(store.MaxProblems)
	rows, err = s.pool.Query(ctx, `SELECT v.id, v.base_id, v.op, v.len, v.own_count, v.placement::text, v.prompt_tokens,
	v.completion_tokens, v.total_tokens, v.run, v.step, v.agent, v.model, v.worker, v.trace_id,
	v.extras::text, v.key, v.created_at, v.created_nanos, v.hash, c.ord, c.kind, c.payload, c.hash, v.lane, v.pos, c.lane
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
			cur.Parents = parents[cur.ID]
			check.Add(cur, curChunks)
			check.CheckLane(cur, curLane, chunkLanes)
		}
	}
	for rows.Next() {
		var ord *int32
		var kind, payload, hash *string
		var lane session.ID
		var pos int32
		var chunkLane *session.ID
		var noParents []session.ID
		v, _, err := scanVersion(verifyRow{rows, []any{&ord, &kind, &payload, &hash, &lane, &pos, &chunkLane}, &noParents})
		if err != nil {
			return store.VerifyReport{}, translate("verify", err)
		}
		if cur == nil || cur.ID != v.ID {
			flush()
			cur, curChunks, chunkLanes = v, nil, nil
			curLane = graphrow.LanePos{Lane: lane, Pos: int(pos)}
		}
		if ord != nil {
			curChunks = append(curChunks, graphrow.StoredChunk{Ord: int(*ord), Kind: *kind, Payload: []byte(*payload), Hash: *hash})
			chunkLanes = append(chunkLanes, *chunkLane)
		}
	}
	if err := rows.Err(); err != nil {
		return store.VerifyReport{}, translate("verify", err)
	}
	flush()
	rows.Close()
	if err := s.checkRedactions(ctx, check); err != nil {
		return store.VerifyReport{}, err
	}
	rep := store.VerifyReport{Versions: check.Versions, Chunks: check.Chunks, Edges: check.Edges, Problems: check.Problems}
	return rep, check.Err()
}

// verifyRow adapts a Verify row (version columns without parents, then chunk
// columns) to scanVersion.
type verifyRow struct {
	rows    pgx.Rows
	extra   []any
	parents *[]session.ID
}

func (r verifyRow) Scan(dest ...any) error {
	// dest ends with the parents array, which this query does not select.
	*r.parents = nil
	n := len(dest) - 1
	if err := r.rows.Scan(append(dest[:n:n], r.extra...)...); err != nil {
		return err
	}
	return nil
}

// checkRedactions reports chunk rows holding a redaction marker that no
// redaction recorded (migration 00014), or whose bytes are not the marker
// recorded when it was redacted (00017); each check is skipped on a schema
// older than its migration.
func (s *Store) checkRedactions(ctx context.Context, check *graphrow.Checker) error {
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('redactions') IS NOT NULL`).Scan(&exists); err != nil {
		return translate("verify", err)
	}
	if !exists {
		return nil
	}
	rows, err := s.pool.Query(ctx, graphrow.UnrecordedRedactionsPostgres)
	if err != nil {
		return translate("verify", err)
	}
	defer rows.Close()
	if err := check.CheckRedactions(ctx, rows); err != nil {
		return translate("verify", err)
	}
	rows.Close()
	// Migration 00017 records each marker's bytes: a marker edited past
	// the triggers no longer matches.
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('redaction_markers') IS NOT NULL`).Scan(&exists); err != nil {
		return translate("verify", err)
	}
	if !exists {
		return nil
	}
	altered, err := s.pool.Query(ctx, graphrow.AlteredRedactionsPostgres)
	if err != nil {
		return translate("verify", err)
	}
	defer altered.Close()
	if err := check.CheckAlteredRedactions(ctx, altered); err != nil {
		return translate("verify", err)
	}
	return nil
}
