package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/internal/graphrow"
)

var _ session.BulkGraph = (*Store)(nil)

// Bulk implements [session.BulkGraph]: fn runs in one write transaction
// on the writer connection (other writers wait for it), and each
// [session.BulkTx.PutBatch] writes its versions with multi-row INSERTs.
// Versions written in bulk are not cached.
func (s *Store) Bulk(ctx context.Context, fn func(ctx context.Context, tx session.BulkTx) error) error {
	// Alone, not in a group: an import reads its client's upload inside
	// this transaction, and a group's members wait for its last.
	tx, err := s.writer.BeginTx(alone(ctx), nil)
	if err != nil {
		return translate("bulk", err)
	}
	if err := fn(ctx, &bulkTx{q: tx, lanes: graphrow.NewBulkLanes()}); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return translate("bulk commit", err)
	}
	return nil
}

// bulkTx is the [session.BulkTx] of a SQLite write transaction. Its
// inserts are prepared once per transaction (parsing them for every row
// took a quarter of an import's time).
type bulkTx struct {
	q                         *sql.Tx
	lanes                     *graphrow.BulkLanes
	versions, chunks, lineage *sql.Stmt
}

const (
	bulkVersionSQL = `INSERT INTO versions (id, base_id, op, len, own_count, parent_count, placement,
	prompt_tokens, completion_tokens, total_tokens, run, step, agent, model, worker, trace_id, extras, key,
	created_at, hash, lane, pos) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	bulkChunkSQL = `INSERT INTO chunks (version_id, lane, ord, kind, payload, hash) VALUES (?, ?, ?, ?, ?, ?)`
	bulkEdgeSQL  = `INSERT INTO lineage (child_id, parent_id, ordinal, op) VALUES (?, ?, ?, ?)`
)

// prepare prepares the inserts on first use.
func (b *bulkTx) prepare(ctx context.Context) error {
	if b.versions != nil {
		return nil
	}
	var err error
	if b.versions, err = b.q.PrepareContext(ctx, bulkVersionSQL); err != nil {
		return err
	}
	if b.chunks, err = b.q.PrepareContext(ctx, bulkChunkSQL); err != nil {
		return err
	}
	b.lineage, err = b.q.PrepareContext(ctx, bulkEdgeSQL)
	return err
}

// insert writes v in lane lp with the prepared statements.
func (b *bulkTx) insert(ctx context.Context, v *session.Version, lp graphrow.LanePos) error {
	args, err := versionArgs(v)
	if err != nil {
		return err
	}
	id, lane := v.ID.String(), lp.Lane.String()
	if _, err := b.versions.ExecContext(ctx, append(args, lane, lp.Pos)...); err != nil {
		return err
	}
	start := v.Len - len(v.Chunks)
	for i, c := range v.Chunks {
		if _, err := b.chunks.ExecContext(ctx, id, lane, start+i, string(c.Kind()), string(c.Payload()), c.Hash()); err != nil {
			return err
		}
	}
	for i, p := range v.Parents {
		if _, err := b.lineage.ExecContext(ctx, id, p.String(), i, string(v.Op)); err != nil {
			return err
		}
	}
	return nil
}

// lookupBatch bounds the parameters of one lookup query.
const lookupBatch = 400

func (b *bulkTx) Lookup(ctx context.Context, ids []session.ID, keys []string) ([]*session.Version, error) {
	var out []*session.Version
	seen := make(map[session.ID]bool)
	query := func(col string, args []any) error {
		rows, err := b.q.QueryContext(ctx, `SELECT id, hash, len, coalesce(key, '') FROM versions WHERE `+col+` IN (?`+strings.Repeat(",?", len(args)-1)+`)`, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			v := &session.Version{}
			if err := rows.Scan(&v.ID, &v.Hash, &v.Len, &v.Key); err != nil {
				return err
			}
			if !seen[v.ID] {
				seen[v.ID] = true
				out = append(out, v)
			}
		}
		return rows.Err()
	}
	for lo := 0; lo < len(ids); lo += lookupBatch {
		args := make([]any, 0, lookupBatch)
		for _, id := range ids[lo:min(lo+lookupBatch, len(ids))] {
			args = append(args, id.String())
		}
		if err := query("id", args); err != nil {
			return nil, translate("bulk lookup", err)
		}
	}
	for lo := 0; lo < len(keys); lo += lookupBatch {
		args := make([]any, 0, lookupBatch)
		for _, k := range keys[lo:min(lo+lookupBatch, len(keys))] {
			args = append(args, k)
		}
		if err := query("key", args); err != nil {
			return nil, translate("bulk lookup", err)
		}
	}
	return out, nil
}

func (b *bulkTx) PutBatch(ctx context.Context, vs []*session.Version) error {
	if len(vs) == 0 {
		return nil
	}
	ext := graphrow.External(vs)
	headers := make(map[session.ID]graphrow.Header, len(ext))
	lanes := make(map[session.ID]graphrow.LanePos, len(ext))
	for lo := 0; lo < len(ext); lo += lookupBatch {
		args := make([]any, 0, lookupBatch)
		for _, id := range ext[lo:min(lo+lookupBatch, len(ext))] {
			args = append(args, id.String())
		}
		if err := readLanes(ctx, b.q, args, headers, lanes); err != nil {
			return translate("put batch", err)
		}
	}
	if err := graphrow.CheckBatch(vs, headers); err != nil {
		return fmt.Errorf("put batch: %w", err)
	}
	if err := b.prepare(ctx); err != nil {
		return translate("put batch", err)
	}
	lp := b.lanes.Assign(vs, lanes)
	for i, v := range vs {
		if err := b.insert(ctx, v, lp[i]); err != nil {
			if isUnique(err) {
				return fmt.Errorf("put batch: %w: versions[%d] (%s): id or key already stored", session.ErrConflict, i, v.ID)
			}
			return translate("put batch", err)
		}
	}
	return nil
}

// readLanes adds the headers and lanes of the stored versions among ids.
func readLanes(ctx context.Context, q querier, ids []any, headers map[session.ID]graphrow.Header, lanes map[session.ID]graphrow.LanePos) error {
	rows, err := q.QueryContext(ctx, `SELECT id, hash, len, lane, pos FROM versions WHERE id IN (?`+strings.Repeat(",?", len(ids)-1)+`)`, ids...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var h graphrow.Header
		var lp graphrow.LanePos
		if err := rows.Scan(&h.ID, &h.Hash, &h.Len, &lp.Lane, &lp.Pos); err != nil {
			return err
		}
		headers[h.ID], lanes[h.ID] = h, lp
	}
	return rows.Err()
}
