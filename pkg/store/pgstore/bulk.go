package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/internal/graphrow"
)

var _ session.BulkGraph = (*Store)(nil)

// Bulk implements [session.BulkGraph]: fn runs in one transaction of the
// pool, and each [session.BulkTx.PutBatch] writes its versions with COPY.
// Versions written in bulk are not cached (an import would only evict the
// working set). After a commit of at least 1,000 versions the graph tables
// are analyzed, as after PutMany.
//
// The transaction is bound by the connection's
// idle_in_transaction_session_timeout ([IdleInTransactionTimeout]): fn must
// not wait on anything slower than the database between statements (the
// coordinator reads an import's body before it calls Bulk).
func (s *Store) Bulk(ctx context.Context, fn func(ctx context.Context, tx session.BulkTx) error) error {
	var fnErr error
	var written int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		bt := &bulkTx{tx: tx, lanes: graphrow.NewBulkLanes(), d: &db{q: tx, tenant: s.tenant}}
		fnErr = fn(ctx, bt)
		written = bt.written
		return fnErr
	})
	if fnErr != nil {
		return fnErr
	}
	if err != nil {
		return translate("bulk", err)
	}
	if written >= analyzeAfter {
		if _, err := s.pool.Exec(ctx, `ANALYZE versions, chunks, lineage`); err != nil {
			return translate("bulk: analyze", err)
		}
	}
	return nil
}

// bulkTx is the [session.BulkTx] of a Postgres transaction.
type bulkTx struct {
	tx      pgx.Tx
	lanes   *graphrow.BulkLanes
	written int
	// d states each version's tenant (batchTenants), as single puts do.
	d *db
}

func (b *bulkTx) Lookup(ctx context.Context, ids []session.ID, keys []string) ([]*session.Version, error) {
	if len(ids) == 0 && len(keys) == 0 {
		return nil, nil
	}
	if keys == nil {
		keys = []string{}
	}
	rows, err := b.tx.Query(ctx, `SELECT id, hash, len, coalesce(key, '') FROM versions WHERE id = ANY($1) OR key = ANY($2)`, ids, keys)
	if err != nil {
		return nil, translate("bulk lookup", err)
	}
	defer rows.Close()
	var out []*session.Version
	for rows.Next() {
		v := &session.Version{}
		if err := rows.Scan(&v.ID, &v.Hash, &v.Len, &v.Key); err != nil {
			return nil, translate("bulk lookup", err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, translate("bulk lookup", err)
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
	if len(ext) > 0 {
		rows, err := b.tx.Query(ctx, `SELECT id, hash, len, lane, pos FROM versions WHERE id = ANY($1)`, ext)
		if err != nil {
			return translate("put batch", err)
		}
		for rows.Next() {
			var h graphrow.Header
			var lp graphrow.LanePos
			var pos int32
			if err := rows.Scan(&h.ID, &h.Hash, &h.Len, &lp.Lane, &pos); err != nil {
				rows.Close()
				return translate("put batch", err)
			}
			lp.Pos = int(pos)
			headers[h.ID], lanes[h.ID] = h, lp
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return translate("put batch", err)
		}
	}
	if err := graphrow.CheckBatch(vs, headers); err != nil {
		return fmt.Errorf("put batch: %w", err)
	}
	lp := b.lanes.Assign(vs, lanes)
	tenants, err := b.d.batchTenants(ctx, vs)
	if err != nil {
		return translate("put batch: tenants", err)
	}
	batch, err := bulkInserts(vs, lp, tenants)
	if err != nil {
		return fmt.Errorf("put batch: %w", err)
	}
	if err := b.tx.SendBatch(ctx, batch).Close(); err != nil {
		return translate("put batch", err)
	}
	b.written += len(vs)
	return nil
}

// The bulk inserts pass each column as one array parameter and unnest them:
// three statements a batch, whatever its size. COPY would be faster still,
// but Postgres refuses COPY FROM on tables with row-level security, which
// tenants' connections are under.
const (
	bulkVersionsSQL = `INSERT INTO versions (id, base_id, op, len, own_count, parent_count, placement,
	prompt_tokens, completion_tokens, total_tokens, run, step, agent, model, worker, trace_id, extras, key,
	created_at, created_nanos, hash, lane, pos, tenant)
SELECT t.id, t.base_id, t.op, t.len, t.own_count, t.parent_count, t.placement::jsonb,
	t.prompt_tokens, t.completion_tokens, t.total_tokens, t.run, t.step, t.agent, t.model, t.worker, t.trace_id,
	t.extras::json, t.key, t.created_at, t.created_nanos, t.hash, t.lane, t.pos, t.tenant
FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::integer[], $5::integer[], $6::integer[], $7::text[],
	$8::bigint[], $9::bigint[], $10::bigint[], $11::text[], $12::text[], $13::text[], $14::text[], $15::text[],
	$16::text[], $17::text[], $18::text[], $19::timestamptz[], $20::smallint[], $21::text[], $22::uuid[], $23::integer[], $24::text[])
	WITH ORDINALITY AS t(id, base_id, op, len, own_count, parent_count, placement,
	prompt_tokens, completion_tokens, total_tokens, run, step, agent, model, worker, trace_id, extras, key,
	created_at, created_nanos, hash, lane, pos, tenant, n)
ORDER BY t.n`
	bulkChunksSQL = `INSERT INTO chunks (version_id, lane, ord, kind, payload, hash)
SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::integer[], $4::text[], $5::text[], $6::text[])`
	bulkEdgesSQL = `INSERT INTO lineage (child_id, parent_id, ordinal, op)
SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::smallint[], $4::text[])`
)

// rowColumns holds versions' rows column by column, for statements that
// unnest one array parameter per column: the bulk inserts and a commit
// group's (group.go).
type rowColumns struct {
	ids                                        []uuid.UUID
	bases                                      []pgtype.UUID
	ops, placements, extras, hashes            []string
	keys, runs, steps, agents, models, workers []*string
	trace                                      []*string
	lens, owns, pcounts                        []int32
	prompt, completion, total                  []int64
	created                                    []time.Time
	nanos                                      []int16
	chunkVersion                               []uuid.UUID
	chunkOf                                    []int // the index in vs of each chunk's version
	chunkOrd                                   []int32
	chunkKind, chunkPayload, chunkHash         []string
	edgeChild, edgeParent                      []uuid.UUID
	edgeOrd                                    []int16
	edgeOp                                     []string
}

// columnsOf lays vs out as columns: their version rows ($1–$21 of
// bulkVersionsSQL and groupVersionsSQL), their chunks and their edges.
func columnsOf(vs []*session.Version) (*rowColumns, error) {
	n := len(vs)
	c := &rowColumns{
		ids: make([]uuid.UUID, n), bases: make([]pgtype.UUID, n),
		ops: make([]string, n), placements: make([]string, n), extras: make([]string, n), hashes: make([]string, n),
		keys: make([]*string, n), runs: make([]*string, n), steps: make([]*string, n), agents: make([]*string, n),
		models: make([]*string, n), workers: make([]*string, n), trace: make([]*string, n),
		lens: make([]int32, n), owns: make([]int32, n), pcounts: make([]int32, n),
		prompt: make([]int64, n), completion: make([]int64, n), total: make([]int64, n),
		created: make([]time.Time, n), nanos: make([]int16, n),
	}
	for i, v := range vs {
		placement, err := graphrow.Placement(v.Placement)
		if err != nil {
			return nil, fmt.Errorf("versions[%d]: %w", i, err)
		}
		ex, err := graphrow.Extras(v.Extras)
		if err != nil {
			return nil, fmt.Errorf("versions[%d]: %w", i, err)
		}
		c.ids[i], c.ops[i], c.placements[i], c.extras[i], c.hashes[i] = v.ID, string(v.Op), placement, ex, v.Hash
		if v.Base != nil {
			c.bases[i] = pgtype.UUID{Bytes: *v.Base, Valid: true}
		}
		c.keys[i] = graphrow.NullString(&v.Key)
		p := &v.Producer
		c.runs[i], c.steps[i], c.agents[i] = graphrow.NullString(&p.Run), graphrow.NullString(&p.Step), graphrow.NullString(&p.Agent)
		c.models[i], c.workers[i], c.trace[i] = graphrow.NullString(&p.Model), graphrow.NullString(&p.Worker), graphrow.NullString(&p.TraceID)
		c.lens[i], c.owns[i], c.pcounts[i] = int32(v.Len), int32(len(v.Chunks)), int32(len(v.Parents))
		c.prompt[i], c.completion[i], c.total[i] = v.Usage.PromptTokens, v.Usage.CompletionTokens, v.Usage.TotalTokens
		at := v.CreatedAt.UTC()
		micro := at.Truncate(time.Microsecond)
		c.created[i], c.nanos[i] = micro, int16(at.Sub(micro))
		start := v.Len - len(v.Chunks)
		for k, ch := range v.Chunks {
			c.chunkVersion = append(c.chunkVersion, v.ID)
			c.chunkOf = append(c.chunkOf, i)
			c.chunkOrd = append(c.chunkOrd, int32(start+k))
			c.chunkKind = append(c.chunkKind, string(ch.Kind()))
			c.chunkPayload = append(c.chunkPayload, string(ch.Payload()))
			c.chunkHash = append(c.chunkHash, ch.Hash())
		}
		for k, parent := range v.Parents {
			c.edgeChild = append(c.edgeChild, v.ID)
			c.edgeParent = append(c.edgeParent, parent)
			c.edgeOrd = append(c.edgeOrd, int16(k))
			c.edgeOp = append(c.edgeOp, string(v.Op))
		}
	}
	return c, nil
}

// versionArgs returns the row columns as the arguments $1–$21.
func (c *rowColumns) versionArgs(extra ...any) []any {
	return append([]any{c.ids, c.bases, c.ops, c.lens, c.owns, c.pcounts, c.placements, c.prompt, c.completion, c.total,
		c.runs, c.steps, c.agents, c.models, c.workers, c.trace, c.extras, c.keys, c.created, c.nanos, c.hashes}, extra...)
}

// queueEdges queues the edges' insert, if there are any.
func (c *rowColumns) queueEdges(b *pgx.Batch) {
	if len(c.edgeChild) > 0 {
		b.Queue(bulkEdgesSQL, c.edgeChild, c.edgeParent, c.edgeOrd, c.edgeOp)
	}
}

// bulkInserts builds the statements writing vs in lanes lp with the tenants
// batchTenants stated (versions in order, so their commit sequence follows
// the file).
func bulkInserts(vs []*session.Version, lp []graphrow.LanePos, tenants []any) (*pgx.Batch, error) {
	c, err := columnsOf(vs)
	if err != nil {
		return nil, err
	}
	n := len(vs)
	stated := make([]*string, n)
	for i, t := range tenants {
		if t, ok := t.(string); ok {
			stated[i] = &t
		}
	}
	lanes, pos := make([]uuid.UUID, n), make([]int32, n)
	for i := range vs {
		lanes[i], pos[i] = lp[i].Lane, int32(lp[i].Pos)
	}
	b := &pgx.Batch{}
	b.Queue(bulkVersionsSQL, c.versionArgs(lanes, pos, stated)...)
	if len(c.chunkVersion) > 0 {
		chunkLane := make([]uuid.UUID, len(c.chunkOf))
		for k, i := range c.chunkOf {
			chunkLane[k] = lanes[i]
		}
		b.Queue(bulkChunksSQL, c.chunkVersion, chunkLane, c.chunkOrd, c.chunkKind, c.chunkPayload, c.chunkHash)
	}
	c.queueEdges(b)
	return b, nil
}
