package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/internal/graphrow"
)

// chunkRowsPerInsert bounds a multi-row INSERT (5 parameters a row, well
// under SQLite's 32766-parameter limit).
const chunkRowsPerInsert = 500

// headers returns the id, hash and len of the given stored versions.
func (d *db) headers(ctx context.Context, q querier, ids []session.ID) (map[session.ID]graphrow.Header, error) {
	out := make(map[session.ID]graphrow.Header, len(ids))
	var missing []any
	for _, id := range ids {
		if v, ok := d.cache.Version(id); ok {
			out[id] = graphrow.Header{ID: v.ID, Hash: v.Hash, Len: v.Len}
		} else {
			missing = append(missing, id.String())
		}
	}
	for len(missing) > 0 {
		n := min(len(missing), 500)
		if err := readHeaders(ctx, q, missing[:n], out); err != nil {
			return nil, err
		}
		missing = missing[n:]
	}
	return out, nil
}

// readHeaders adds the headers of the stored versions among ids to out.
func readHeaders(ctx context.Context, q querier, ids []any, out map[session.ID]graphrow.Header) error {
	rows, err := q.QueryContext(ctx, `SELECT id, hash, len FROM versions WHERE id IN (?`+strings.Repeat(",?", len(ids)-1)+`)`, ids...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var h graphrow.Header
		if err := rows.Scan(&h.ID, &h.Hash, &h.Len); err != nil {
			return err
		}
		out[h.ID] = h
	}
	return rows.Err()
}

// Put implements [session.Graph].
func (d *db) Put(ctx context.Context, v *session.Version) (*session.Version, error) {
	if v == nil {
		return nil, fmt.Errorf("put: %w: nil version", session.ErrInvalidVersion)
	}
	e := d.cache.Epoch()
	if got, ok := d.cache.Version(v.ID); ok && (v.Key == "" || got.Key == v.Key) {
		return sameOrConflict(got, v)
	}
	if err := d.verify(ctx, v); err != nil {
		return nil, err
	}
	err := d.write(ctx, func(q querier) error { return insert(ctx, q, v, nil) })
	if err == nil {
		d.remember(v, e)
		return v, nil
	}
	if !isUnique(err) {
		return nil, translate(fmt.Sprintf("put %s", v.ID), err)
	}
	if v.Key != "" {
		if got, kerr := d.GetByKey(ctx, v.Key); kerr == nil {
			return session.KeyedReplay(got, v)
		}
	}
	got, gerr := d.Get(ctx, v.ID)
	if gerr != nil {
		return nil, translate(fmt.Sprintf("put %s", v.ID), err)
	}
	return sameOrConflict(got, v)
}

// verify checks v against its stored links (parents and base) before it
// is written.
func (d *db) verify(ctx context.Context, v *session.Version) error {
	headers, err := d.headers(ctx, d.r, graphrow.LinkIDs(v))
	if err != nil {
		return translate(fmt.Sprintf("put %s", v.ID), err)
	}
	if err := graphrow.VerifyAgainst(v, headers); err != nil {
		return fmt.Errorf("put %s: %w", v.ID, err)
	}
	return nil
}

func isUnique(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && (se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY)
}

func sameOrConflict(got, v *session.Version) (*session.Version, error) {
	if got.Hash == v.Hash {
		return got, nil
	}
	return nil, fmt.Errorf("put %s: %w: id already holds a different version", v.ID, session.ErrConflict)
}

// write runs fn atomically: in its own transaction on the writer, or inside
// the caller's transaction under a savepoint, so a failed write leaves the
// caller's transaction usable.
func (d *db) write(ctx context.Context, fn func(q querier) error) error {
	if d.inTx {
		if _, err := d.w.ExecContext(ctx, `SAVEPOINT rath_put`); err != nil {
			return err
		}
		if err := fn(d.w); err != nil {
			_, _ = d.w.ExecContext(ctx, `ROLLBACK TO rath_put`)
			_, _ = d.w.ExecContext(ctx, `RELEASE rath_put`)
			return err
		}
		_, err := d.w.ExecContext(ctx, `RELEASE rath_put`)
		return err
	}
	tx, err := d.w.(*sql.DB).BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// insertVersionSQL writes one version row. When ?22 is true (the version
// extends its base, which is also its first parent) it joins the base's
// lane at the next position if that position is free, else it starts its own
// lane. The writer holds the database's write lock, so the check cannot race.
const insertVersionSQL = `WITH claim AS (
	SELECT b.lane, b.pos + 1 AS pos FROM versions b
	WHERE ?22 AND b.id = ?2
	  AND NOT EXISTS (SELECT 1 FROM versions o WHERE o.lane = b.lane AND o.pos = b.pos + 1)
)
INSERT INTO versions (id, base_id, op, len, own_count, parent_count, placement,
	prompt_tokens, completion_tokens, total_tokens, run, step, agent, model, worker, trace_id, extras, key,
	created_at, hash, lane, pos)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20,
	coalesce((SELECT lane FROM claim), ?1), coalesce((SELECT pos FROM claim), 0))
RETURNING lane`

// insert writes v. lane, when set, is the lane to use without a claim (a
// bulk put assigns lanes itself); otherwise the version claims its base's
// lane when it extends it.
func insert(ctx context.Context, q querier, v *session.Version, lane *graphrow.LanePos) error {
	args, err := versionArgs(v)
	if err != nil {
		return err
	}
	id := v.ID.String()
	var laneID string
	if lane != nil {
		laneID = lane.Lane.String()
		if _, err := q.ExecContext(ctx, `INSERT INTO versions (id, base_id, op, len, own_count, parent_count, placement,
	prompt_tokens, completion_tokens, total_tokens, run, step, agent, model, worker, trace_id, extras, key,
	created_at, hash, lane, pos) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			append(args, laneID, lane.Pos)...); err != nil {
			return err
		}
	} else {
		args = append(args, nil, graphrow.ExtendsBase(v))
		if err := q.QueryRowContext(ctx, insertVersionSQL, args...).Scan(&laneID); err != nil {
			return err
		}
	}
	start := v.Len - len(v.Chunks)
	for lo := 0; lo < len(v.Chunks); lo += chunkRowsPerInsert {
		hi := min(lo+chunkRowsPerInsert, len(v.Chunks))
		args := make([]any, 0, 6*(hi-lo))
		for i := lo; i < hi; i++ {
			c := v.Chunks[i]
			args = append(args, id, laneID, start+i, string(c.Kind()), string(c.Payload()), c.Hash())
		}
		if _, err := q.ExecContext(ctx, `INSERT INTO chunks (version_id, lane, ord, kind, payload, hash) VALUES (?,?,?,?,?,?)`+
			strings.Repeat(",(?,?,?,?,?,?)", hi-lo-1), args...); err != nil {
			return err
		}
	}
	if len(v.Parents) > 0 {
		args := make([]any, 0, 4*len(v.Parents))
		for i, p := range v.Parents {
			args = append(args, id, p.String(), i, string(v.Op))
		}
		if _, err := q.ExecContext(ctx, `INSERT INTO lineage (child_id, parent_id, ordinal, op) VALUES (?,?,?,?)`+
			strings.Repeat(",(?,?,?,?)", len(v.Parents)-1), args...); err != nil {
			return err
		}
	}
	return nil
}

// PutMany implements [store.Store] in one write transaction.
func (d *db) PutMany(ctx context.Context, vs []*session.Version) error {
	if len(vs) == 0 {
		return nil
	}
	e := d.cache.Epoch()
	err := d.write(ctx, func(q querier) error {
		stored, err := d.headers(ctx, q, graphrow.External(vs))
		if err != nil {
			return err
		}
		if err := graphrow.CheckBatch(vs, stored); err != nil {
			return err
		}
		lanes := graphrow.BatchLanes(vs)
		for i, v := range vs {
			if err := insert(ctx, q, v, &lanes[i]); err != nil {
				if isUnique(err) {
					return fmt.Errorf("%w: versions[%d] (%s): id or key already stored", session.ErrConflict, i, v.ID)
				}
				return err
			}
		}
		return nil
	})
	if err != nil {
		return translate("put many", err)
	}
	for _, v := range vs {
		d.remember(v, e)
	}
	return nil
}

// versionArgs are v's columns of a versions row, id to hash, in the order
// of the inserts' column lists (lane and position follow).
func versionArgs(v *session.Version) ([]any, error) {
	placement, err := graphrow.Placement(v.Placement)
	if err != nil {
		return nil, err
	}
	extras, err := graphrow.Extras(v.Extras)
	if err != nil {
		return nil, err
	}
	var base *string
	if v.Base != nil {
		s := v.Base.String()
		base = &s
	}
	return []any{v.ID.String(), base, string(v.Op), v.Len, len(v.Chunks),
		len(v.Parents), placement, v.Usage.PromptTokens, v.Usage.CompletionTokens, v.Usage.TotalTokens,
		graphrow.NullString(&v.Producer.Run), graphrow.NullString(&v.Producer.Step),
		graphrow.NullString(&v.Producer.Agent), graphrow.NullString(&v.Producer.Model),
		graphrow.NullString(&v.Producer.Worker), graphrow.NullString(&v.Producer.TraceID),
		extras, graphrow.NullString(&v.Key), v.CreatedAt.UTC().Format(timeLayout), v.Hash}, nil
}

// Execer runs statements in the transaction [Store.PutExec] commits; the
// queries see the transaction's own writes.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// PutExec commits v, which must be new, and runs after in the same write
// transaction once v's rows are written: v and the caller's rows (another
// table of this database: internal/runs records a submitted run with its
// input session) are committed together or not at all, with one commit
// where a Put and then the caller's own transaction take two. Unlike Put it
// is not idempotent: v's id or key already stored is an error
// ([session.ErrConflict]), and nothing of after's is written.
func (s *Store) PutExec(ctx context.Context, v *session.Version, after func(ctx context.Context, ex Execer) error) (*session.Version, error) {
	if v == nil {
		return nil, fmt.Errorf("put: %w: nil version", session.ErrInvalidVersion)
	}
	e := s.cache.Epoch()
	if err := s.verify(ctx, v); err != nil {
		return nil, err
	}
	err := s.write(ctx, func(q querier) error {
		if err := insert(ctx, q, v, nil); err != nil {
			if isUnique(err) {
				return fmt.Errorf("put %s: %w: id or key already stored", v.ID, session.ErrConflict)
			}
			return translate(fmt.Sprintf("put %s", v.ID), err)
		}
		return after(ctx, q)
	})
	if err != nil {
		return nil, err
	}
	s.remember(v, e)
	return v, nil
}
