package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"time"

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

const ancestorsSQL = `
WITH RECURSIVE walk(id, depth) AS (
	SELECT parent_id, 1 FROM lineage WHERE child_id = ?1
	UNION
	SELECT l.parent_id, walk.depth + 1 FROM walk JOIN lineage l ON l.child_id = walk.id WHERE walk.depth < ?2
)
SELECT v.id, m.depth, v.op, v.len, v.created_at
FROM (SELECT id, min(depth) AS depth FROM walk GROUP BY id) m JOIN versions v ON v.id = m.id
ORDER BY m.depth, v.seq DESC`

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
	return d.relatives(ctx, "ancestors", ancestorsSQL, id, maxDepth)
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
	rows, err := s.readers.QueryContext(ctx, `SELECT `+versionCols+`, c.ord, c.kind, c.payload, c.hash
		FROM versions v LEFT JOIN chunks c ON c.version_id = v.id ORDER BY v.seq, c.ord`)
	if err != nil {
		return store.VerifyReport{}, translate("verify", err)
	}
	defer rows.Close()
	var cur *session.Version
	var curChunks []graphrow.StoredChunk
	for rows.Next() {
		var ord sql.NullInt64
		var kind, payload, hash sql.NullString
		v, _, err := scanVersion(rows, &ord, &kind, &payload, &hash)
		if err != nil {
			return store.VerifyReport{}, translate("verify", err)
		}
		if cur == nil || cur.ID != v.ID {
			if cur != nil {
				check.Add(cur, curChunks)
			}
			cur, curChunks = v, nil
		}
		if ord.Valid {
			curChunks = append(curChunks, graphrow.StoredChunk{Ord: int(ord.Int64), Kind: kind.String, Payload: []byte(payload.String), Hash: hash.String})
		}
	}
	if err := rows.Err(); err != nil {
		return store.VerifyReport{}, translate("verify", err)
	}
	if cur != nil {
		check.Add(cur, curChunks)
	}
	rep := store.VerifyReport{Versions: check.Versions, Chunks: check.Chunks, Edges: check.Edges, Problems: check.Problems}
	return rep, check.Err()
}
