package pgstore

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/rath-run/rath/migrations"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/store/internal/graphrow"
)

// CopyThreshold is the number of chunks above which a version's chunks are
// written with COPY instead of one INSERT … SELECT FROM unnest(…).
const CopyThreshold = 512

// Options configures [Open]. The zero value is usable.
type Options struct {
	// Migrate applies the embedded migrations on open (under goose's
	// Postgres session lock). Default false.
	Migrate bool
	// CachedVersions bounds the version cache, in entries: 0 means
	// graphrow.DefaultCachedVersions (4096), negative disables it.
	CachedVersions int
	// CachedTranscripts bounds the transcript cache, in entries: 0 means
	// 256, negative disables it.
	CachedTranscripts int
	// MaxConns bounds the pool; 0 means the URL's pool_max_conns when it
	// sets one, else [DefaultMaxConns].
	MaxConns int32
	// GroupCommit is how many group commits may be in flight at once (see
	// group.go): commits that arrive while one is in flight go together in
	// the next one, which waits for it unless it has stalled ([StallAfter])
	// and fewer than GroupCommit are in flight. 0 means DefaultGroupCommit;
	// negative turns grouping off, so every commit is its own transaction.
	GroupCommit int
	// Tenant is the tenant this store states for the root versions it
	// commits on a system connection (one that does not set rath.tenant):
	// the operator's choice. A version with parents takes its first
	// parent's tenant instead, and a connection that sets rath.tenant
	// commits for that tenant whatever this says (migration 00016; the
	// database refuses a version that gets no tenant, and one whose base
	// or parents belong to another). Empty means [DefaultTenant]: rathctl
	// with store access and a coordinator with authentication off act for
	// the default tenant.
	Tenant string
}

// DefaultTenant is [Options.Tenant]'s default, the operator's tenant.
const DefaultTenant = "default"

// DefaultGroupCommit is [Options.GroupCommit]'s default: up to two groups
// in flight, each on its own connection, the second only once the first
// has stalled. A group of several writes its versions, chunks and edges
// with one statement each (group.go), so a larger group costs Postgres
// less a commit; more groups in flight make them smaller. On the 2-core
// machine (issue 25, docs/BENCHMARKS.md), at 16 steps in flight: four
// groups 838–949 steps/s, two 1,077–1,094, one 1,118–1,129; at 1,000
// sessions the three are alike (1,328–1,450). The second group keeps one
// held up by a row lock or a silent connection from holding every commit
// behind it.
const DefaultGroupCommit = 2

// DefaultMaxConns is [Options.MaxConns]'s default, the run store's pool
// size too (package runs): a worker runs many steps at once, and pgx's own
// default (max(4, CPUs)) made them queue for connections. Connections
// open only when needed; a URL's pool_max_conns overrides it.
const DefaultMaxConns = 16

// ConnURL returns a store URL without its pool_* settings (pool_max_conns
// and the others pgxpool reads), for a single connection or a client such
// as libpq's, which would refuse them.
func ConnURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.RawQuery == "" {
		return rawURL
	}
	q := u.Query()
	changed := false
	for k := range q {
		if strings.HasPrefix(k, "pool_") {
			q.Del(k)
			changed = true
		}
	}
	if !changed {
		return rawURL
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// URLMaxConns returns the pool_max_conns a store URL sets, if any.
func URLMaxConns(rawURL string) (int32, bool) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return 0, false
	}
	v := u.Query().Get("pool_max_conns")
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 1 {
		return 0, false
	}
	return int32(n), true
}

// Store is the Postgres [store.Store].
type Store struct {
	pool  *pgxpool.Pool
	cache *graphrow.Cache
	db    // reads and writes outside a transaction
}

var _ store.Store = (*Store)(nil)

// Open connects to the database named by url (a postgres:// URL or a
// key=value DSN) and checks that it answers. A server that cannot be reached
// is [session.ErrUnavailable].
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's parse errors can quote the URL, password included: keep them out.
		return nil, errors.New("open postgres store: the database URL does not parse")
	}
	// The URL's pool_max_conns is in cfg already; without it, ours.
	if _, set := URLMaxConns(url); !set {
		cfg.MaxConns = DefaultMaxConns
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	ApplySessionDefaults(cfg.ConnConfig)
	ConfigFromContext(ctx, cfg.ConnConfig)
	cfg.AfterConnect = AfterConnect
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, translate("open postgres store", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, translate("open postgres store", err)
	}
	s := &Store{pool: pool, cache: graphrow.NewCache(opts.CachedVersions, opts.CachedTranscripts)}
	s.db = db{q: pool, cache: s.cache, epochs: &epochs{}, tenant: cmp.Or(opts.Tenant, DefaultTenant)}
	if opts.GroupCommit >= 0 {
		s.group = newGrouper(pool, cmp.Or(opts.GroupCommit, DefaultGroupCommit), s.tenant)
	}
	if opts.Migrate {
		if err := s.Migrate(ctx); err != nil {
			pool.Close()
			return nil, err
		}
	}
	return s, nil
}

// IdleInTransactionTimeout is the idle_in_transaction_session_timeout
// [ApplySessionDefaults] sets when the URL does not: how long Postgres keeps
// a transaction whose client went silent (a worker cut off by a partition
// between two statements of a commit). Its row locks would otherwise block
// the redelivered step's commit until the server's TCP keepalives notice,
// hours later. Rath's transactions never wait on anything but the database.
const IdleInTransactionTimeout = 30 * time.Second

// ApplySessionDefaults sets the session parameters Rath relies on, unless
// the connection string already sets them: idle_in_transaction_session_timeout
// (see [IdleInTransactionTimeout]).
func ApplySessionDefaults(cfg *pgx.ConnConfig) {
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	if _, ok := cfg.RuntimeParams["idle_in_transaction_session_timeout"]; !ok {
		cfg.RuntimeParams["idle_in_transaction_session_timeout"] = fmt.Sprint(IdleInTransactionTimeout.Milliseconds())
	}
}

// Pool returns the underlying pool, for tests and tools that run their own
// SQL (the graph tables refuse UPDATE and DELETE whatever the caller).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close implements [store.Store].
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Migrate implements [store.Store]: it applies the embedded Postgres
// migrations under goose's session-level advisory lock, so processes
// migrating at once take turns and each sees the schema complete.
func (s *Store) Migrate(ctx context.Context) error {
	return Migrate(ctx, s.pool)
}

// Migrate applies the embedded Postgres migrations through pool.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	sqlDB := stdlib.OpenDBFromPool(pool)
	defer sqlDB.Close()
	return migrateDB(ctx, sqlDB)
}

func migrateDB(ctx context.Context, sqlDB *sql.DB) error {
	// Poll every second for up to 5 minutes while another process holds the lock.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 300))
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.Postgres(),
		goose.WithSessionLocker(locker), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return translate("migrate", err)
	}
	return nil
}

// Tx implements [store.Store]. Versions put inside fn are cached only once
// the transaction commits.
func (s *Store) Tx(ctx context.Context, fn func(ctx context.Context, tx store.TxStore) error) error {
	var pending []*session.Version
	var fnErr error
	e := s.cache.Epoch()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		fnErr = fn(ctx, &txStore{db: db{q: tx, cache: s.cache, epochs: s.epochs, tenant: s.tenant, inTx: true, pending: &pending}})
		return fnErr
	})
	if fnErr != nil {
		return fnErr // the caller's own error, as it returned it
	}
	if err != nil {
		return translate("tx", err)
	}
	for _, v := range pending {
		s.cache.AddVersion(v, e)
	}
	return nil
}

type txStore struct{ db }

// ExecContext runs a statement in the transaction, so callers can write
// their own tables of the same database in it (internal/runs records a run
// with the session it submits). It is not part of [store.TxStore].
func (t *txStore) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	tag, err := t.q.Exec(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return driver.RowsAffected(tag.RowsAffected()), nil
}

// querier is what both the pool and a transaction offer.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error)
	Begin(ctx context.Context) (pgx.Tx, error)
}

// db runs the graph operations against a pool or a transaction.
type db struct {
	q     querier
	cache *graphrow.Cache
	// epochs remembers whether the schema has the redaction epoch
	// (migration 00018); shared by the pool's db and its transactions.
	epochs *epochs
	// group, when set (the pool's db), sends single commits as group
	// commits.
	group *grouper
	// tenant is stated for root versions ([Options.Tenant]).
	tenant string
	// inTx: q is a transaction; pending collects versions to cache on commit.
	inTx    bool
	pending *[]*session.Version
}

// remember caches v, read or written at epoch e, or in a transaction
// queues it for the commit (Tx adds it with the epoch it started at).
func (d *db) remember(v *session.Version, e graphrow.Epoch) {
	if d.inTx {
		*d.pending = append(*d.pending, v)
		return
	}
	d.cache.AddVersion(v, e)
}

const versionCols = `v.id, v.base_id, v.op, v.len, v.own_count, v.placement::text, v.prompt_tokens,
	v.completion_tokens, v.total_tokens, v.run, v.step, v.agent, v.model, v.worker, v.trace_id,
	v.extras::text, v.key, v.created_at, v.created_nanos, v.hash,
	ARRAY(SELECT l.parent_id FROM lineage l WHERE l.child_id = v.id ORDER BY l.ordinal)`

// scanVersion reads versionCols into a Version (without chunks) and its
// own-chunk count.
func scanVersion(row pgx.Row) (*session.Version, int, error) {
	var (
		v    session.Version
		base *session.ID
		own  int
		f    storedFields
	)
	err := row.Scan(&v.ID, &base, &v.Op, &v.Len, &own, &f.placement, &v.Usage.PromptTokens,
		&v.Usage.CompletionTokens, &v.Usage.TotalTokens, &f.run, &f.step, &f.agent, &f.model, &f.worker, &f.tr,
		&f.extras, &f.key, &f.created, &f.nanos, &v.Hash, &f.parents)
	if err != nil {
		return nil, 0, err
	}
	v.Base = base
	if err := f.apply(&v); err != nil {
		return nil, 0, err
	}
	return &v, own, nil
}

// storedFields are the columns of versionCols stored in another form than
// the Version's: parsed and set by apply.
type storedFields struct {
	parents                                  []session.ID
	placement, extras                        string
	run, step, agent, model, worker, tr, key *string
	created                                  time.Time
	nanos                                    int16
}

// apply sets v's parents, placement, extras, producer, key and creation
// time from f.
func (f *storedFields) apply(v *session.Version) error {
	if len(f.parents) > 0 {
		v.Parents = f.parents
	}
	var err error
	if v.Placement, err = graphrow.ParsePlacement(f.placement); err != nil {
		return err
	}
	if v.Extras, err = graphrow.ParseExtras(f.extras); err != nil {
		return err
	}
	v.Producer = session.Producer{Run: graphrow.FromNull(f.run), Step: graphrow.FromNull(f.step),
		Agent: graphrow.FromNull(f.agent), Model: graphrow.FromNull(f.model), Worker: graphrow.FromNull(f.worker),
		TraceID: graphrow.FromNull(f.tr)}
	v.Key = graphrow.FromNull(f.key)
	v.CreatedAt = f.created.UTC().Add(time.Duration(f.nanos))
	return nil
}

func infoOf(v *session.Version, own int) store.Info {
	in := store.InfoOf(v)
	in.OwnChunks = own
	return in
}

// scanChunks reads (kind, payload) rows. Both are text, whose wire form in
// either format is the bytes themselves, so the raw values are used
// directly: kinds without allocating, payloads copied into an arena.
func scanChunks(rows pgx.Rows) ([]session.Chunk, error) {
	defer rows.Close()
	var out []session.Chunk
	var arena graphrow.Arena
	for rows.Next() {
		raw := rows.RawValues()
		if len(raw) != 2 || raw[0] == nil || raw[1] == nil {
			return nil, fmt.Errorf("%w: stored chunk %d has a NULL kind or payload", session.ErrHashMismatch, len(out))
		}
		c, err := decodeChunk(&arena, raw[0], raw[1])
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// decodeChunk decodes a stored chunk's kind and payload, copying the
// payload into arena.
func decodeChunk(arena *graphrow.Arena, kind, payload []byte) (session.Chunk, error) {
	c, err := session.ChunkFromCanonical(graphrow.KindOf(kind), arena.Copy(payload))
	if err != nil {
		return session.Chunk{}, fmt.Errorf("%w: stored chunk: %w", session.ErrHashMismatch, err)
	}
	return c, nil
}

// Get implements [session.Graph].
func (d *db) Get(ctx context.Context, id session.ID) (*session.Version, error) {
	return d.get(ctx, id, d.fresh(ctx))
}

// get reads version id, from the cache when useCache (the caller synced
// it with [db.fresh]).
func (d *db) get(ctx context.Context, id session.ID, useCache bool) (*session.Version, error) {
	if useCache {
		if v, ok := d.cache.Version(id); ok {
			return v, nil
		}
	}
	v, err := d.load(ctx, `WHERE v.id = $1`, id)
	if err != nil {
		return nil, translate(fmt.Sprintf("get %s", id), err)
	}
	return v, nil
}

// GetByKey implements [store.Store].
func (d *db) GetByKey(ctx context.Context, key string) (*session.Version, error) {
	if key == "" {
		return nil, fmt.Errorf("get by key: %w: empty key", session.ErrNotFound)
	}
	v, err := d.load(ctx, `WHERE v.key = $1`, key)
	if err != nil {
		return nil, translate(fmt.Sprintf("get by key %q", key), err)
	}
	return v, nil
}

// load reads one version and its own chunks in one pipelined round trip.
func (d *db) load(ctx context.Context, where string, arg any) (*session.Version, error) {
	e := d.cache.Epoch()
	b := &pgx.Batch{}
	b.Queue(`SELECT `+versionCols+` FROM versions v `+where, arg)
	b.Queue(`SELECT c.kind, c.payload FROM versions v JOIN chunks c ON c.version_id = v.id `+where+` ORDER BY c.ord`, arg)
	br := d.q.SendBatch(ctx, b)
	defer br.Close()
	v, own, err := scanVersion(br.QueryRow())
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	if v.Chunks, err = scanChunks(rows); err != nil {
		return nil, err
	}
	if len(v.Chunks) != own {
		return nil, fmt.Errorf("%w: version %s has %d chunk rows, want %d", session.ErrHashMismatch, v.ID, len(v.Chunks), own)
	}
	if err := br.Close(); err != nil {
		return nil, err
	}
	d.remember(v, e)
	return v, nil
}

// transcriptSQL follows the lanes of id's base chain (one step per lane,
// not per version) and reads each lane's chunks as one index range.
const transcriptSQL = `
WITH RECURSIVE seg(lane, hi) AS (
	SELECT lane, len FROM versions WHERE id = $1
	UNION ALL
	SELECT b.lane, b.len FROM seg JOIN versions s ON s.id = seg.lane JOIN versions b ON b.id = s.base_id
)
SELECT c.kind, c.payload FROM seg JOIN chunks c ON c.lane = seg.lane AND c.ord < seg.hi ORDER BY c.ord`

// Transcript implements [session.Graph]: one recursive query, then cached.
func (d *db) Transcript(ctx context.Context, id session.ID) ([]session.Chunk, error) {
	_, t, err := d.transcript(ctx, id, d.fresh(ctx), false)
	return t, err
}

// VersionAndTranscript returns version id and its transcript, as Get and
// Transcript would one after the other, with one redaction-epoch check for
// both (a worker opening its step's input reads both: one round trip less).
func (d *db) VersionAndTranscript(ctx context.Context, id session.ID) (*session.Version, []session.Chunk, error) {
	return d.transcript(ctx, id, d.fresh(ctx), true)
}

// VersionAndTranscriptAt is VersionAndTranscript with the redaction epoch
// the caller read from this database just before (a worker's step start
// reads it in the same statement, runs.Step.RedactionEpoch): the cache is
// synced with it instead of reading it again. It must be the epoch as of a
// moment no earlier than the caller's decision to read id.
func (d *db) VersionAndTranscriptAt(ctx context.Context, id session.ID, epoch int64) (*session.Version, []session.Chunk, error) {
	useCache := d.cache != nil && !d.inTx
	if useCache {
		d.cache.Sync(epoch)
	}
	return d.transcript(ctx, id, useCache, true)
}

// transcript reads id's transcript, from the cache when useCache (the
// caller synced it with [db.fresh]); with needVersion it returns the
// version too.
func (d *db) transcript(ctx context.Context, id session.ID, useCache, needVersion bool) (*session.Version, []session.Chunk, error) {
	if useCache && !needVersion {
		if t, ok := d.cache.Transcript(id); ok {
			return nil, t, nil
		}
	}
	e := d.cache.Epoch()
	v, err := d.get(ctx, id, useCache)
	if err != nil {
		return nil, nil, fmt.Errorf("transcript: %w", err)
	}
	if useCache {
		if t, ok := d.cache.Transcript(id); ok {
			return v, t, nil
		}
	}
	if v.Base == nil {
		d.addTranscript(id, v.Chunks, e)
		return v, v.Chunks, nil
	}
	t, err := d.loadTranscript(ctx, id)
	if err != nil {
		return nil, nil, translate(fmt.Sprintf("transcript %s", id), err)
	}
	if len(t) != v.Len {
		return nil, nil, fmt.Errorf("transcript %s: %w: %d chunks stored, len %d", id, session.ErrHashMismatch, len(t), v.Len)
	}
	d.addTranscript(id, t, e)
	return v, t, nil
}

// addTranscript caches a transcript read at epoch e, unless it was read
// inside a transaction that may yet roll back.
func (d *db) addTranscript(id session.ID, t []session.Chunk, e graphrow.Epoch) {
	if !d.inTx {
		d.cache.AddTranscript(id, t, e)
	}
}

func (d *db) loadTranscript(ctx context.Context, id session.ID) ([]session.Chunk, error) {
	rows, err := d.q.Query(ctx, transcriptSQL, id)
	if err != nil {
		return nil, err
	}
	return scanChunks(rows)
}

// LoadTranscriptUncached loads a transcript with the recursive query,
// bypassing the cache (benchmarks measure the cold path with it).
func (s *Store) LoadTranscriptUncached(ctx context.Context, id session.ID) ([]session.Chunk, error) {
	t, err := s.loadTranscript(ctx, id)
	return t, translate("transcript", err)
}

// commonBaseSQL lists the lanes of both base chains, each with the
// position where the chain leaves it; the common base is in the first lane
// of b's chain that a's chain also crosses, at the lower of the two
// positions.
const commonBaseSQL = `
WITH RECURSIVE
a(lane, pos) AS (
	SELECT lane, pos FROM versions WHERE id = $1
	UNION ALL
	SELECT b.lane, b.pos FROM a JOIN versions s ON s.id = a.lane JOIN versions b ON b.id = s.base_id
),
b(lane, pos, n) AS (
	SELECT lane, pos, 0 FROM versions WHERE id = $2
	UNION ALL
	SELECT v.lane, v.pos, b.n + 1 FROM b JOIN versions s ON s.id = b.lane JOIN versions v ON v.id = s.base_id
)
SELECT v.id FROM b JOIN a ON a.lane = b.lane JOIN versions v ON v.lane = b.lane AND v.pos = LEAST(a.pos, b.pos)
ORDER BY b.n LIMIT 1`

// CommonBase implements [session.Graph].
func (d *db) CommonBase(ctx context.Context, a, b session.ID) (session.ID, bool, error) {
	for _, id := range []session.ID{a, b} {
		if _, err := d.Get(ctx, id); err != nil {
			return session.ID{}, false, fmt.Errorf("common base: %w", err)
		}
	}
	var id session.ID
	err := d.q.QueryRow(ctx, commonBaseSQL, a, b).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return session.ID{}, false, nil
	}
	if err != nil {
		return session.ID{}, false, translate("common base", err)
	}
	return id, true, nil
}

// headers returns the id, hash and len of the given stored versions (those
// missing are absent from the map), from the cache or one query.
func (d *db) headers(ctx context.Context, ids []session.ID) (map[session.ID]graphrow.Header, error) {
	out := make(map[session.ID]graphrow.Header, len(ids))
	var missing []session.ID
	for _, id := range ids {
		if v, ok := d.cache.Version(id); ok {
			out[id] = graphrow.Header{ID: v.ID, Hash: v.Hash, Len: v.Len}
		} else {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	rows, err := d.q.Query(ctx, `SELECT id, hash, len FROM versions WHERE id = ANY($1)`, missing)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var h graphrow.Header
		if err := rows.Scan(&h.ID, &h.Hash, &h.Len); err != nil {
			return nil, err
		}
		out[h.ID] = h
	}
	return out, rows.Err()
}

// Put implements [session.Graph].
func (d *db) Put(ctx context.Context, v *session.Version) (*session.Version, error) {
	got, _, err := d.put(ctx, v, nil)
	return got, err
}

// Stmt is a statement on the caller's own tables of the store's database
// that [Store.PutWith] runs in the transaction of a version's commit.
//
// Commits that go in one group share a transaction, and their statements
// run place by place: every commit's first statement, then every
// second one, and so on, each commit's in its own order. A commit's
// statements must therefore give the same outcome whichever other
// commits' statements run between them, as those of independent commits
// do (two updates of one counter, each read back by its own commit, would
// not).
type Stmt struct {
	SQL  string
	Args []any
	// Scan, when set, reads the statement's rows; nil discards them.
	Scan func(pgx.Rows) error
	// Rows, when set (and Scan is not), is the statement's multi-row
	// form: when the commits of one group each run the same statement
	// (the same Rows) at the same place among their statements, they run
	// as one statement of Rows, whose parameter $i is the array of every
	// commit's argument i, in the group's order. It must write what
	// running SQL once per commit would, one commit after the other in
	// the group's order.
	Rows string
	// Row, when set (and Scan is not), reads the statement's rows one at
	// a time; a statement that has a multi-row form reads its rows so. The
	// last column of each row is the place, from 1, of the commit the row
	// is for among those the statement ran for (SQL, which runs for one
	// commit, returns 1 there): the group hands each row of its Rows form
	// to its commit's Row, and each commit gets the rows SQL would have
	// returned it.
	Row func(pgx.CollectableRow) error
}

// PutWith commits v as Put does and runs after in the same transaction,
// once v's rows are written: v and the caller's rows are committed
// together or not at all, with one fsync'd commit. Unless v's chunks need
// COPY (more than [CopyThreshold]), the version's rows and after go to the
// server as one pipelined batch, which Postgres runs as one implicit
// transaction: one round trip (two when v's links are not cached).
//
// ran reports whether after ran. It is false, with a nil error, when v was
// committed before (a replay: v's key or id is taken); then PutWith
// returns the stored version and after did not run, so the caller can
// settle its own rows another way. An error from after (or its Scan)
// rolls the whole commit back, unless Scan fails after the server has
// committed (a client-side decoding error): the caller must treat such an
// error as "maybe committed", as it would a lost connection.
func (s *Store) PutWith(ctx context.Context, v *session.Version, after ...Stmt) (got *session.Version, ran bool, err error) {
	return s.put(ctx, v, after)
}

func (d *db) put(ctx context.Context, v *session.Version, after []Stmt) (*session.Version, bool, error) {
	if v == nil {
		return nil, false, fmt.Errorf("put: %w: nil version", session.ErrInvalidVersion)
	}
	e := d.cache.Epoch()
	if got, ok := d.cache.Version(v.ID); ok && (v.Key == "" || got.Key == v.Key) {
		got, err := sameOrConflict(got, v)
		return got, false, err
	}
	headers, err := d.headers(ctx, graphrow.LinkIDs(v))
	if err != nil {
		return nil, false, translate(fmt.Sprintf("put %s", v.ID), err)
	}
	if err := graphrow.VerifyAgainst(v, headers); err != nil {
		if v.Key != "" && errors.Is(err, session.ErrNotFound) {
			// A replayed commit whose links are gone cannot happen (rows are
			// never deleted), but a keyed replay still answers with the commit.
			if got, kerr := d.GetByKey(ctx, v.Key); kerr == nil {
				got, err := session.KeyedReplay(got, v)
				return got, false, err
			}
		}
		return nil, false, fmt.Errorf("put %s: %w", v.ID, err)
	}
	err = d.insertOne(ctx, v, graphrow.ExtendsBase(v), after)
	if isLaneRace(err) {
		// Another commit took the next position of the base's lane between
		// the check and the insert: this version starts its own lane.
		err = d.insertOne(ctx, v, false, after)
	}
	if err == nil {
		d.remember(v, e)
		return v, true, nil
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" || !isGraphKey(pgErr) {
		return nil, false, translate(fmt.Sprintf("put %s", v.ID), err)
	}
	// A unique key or id is taken: a replayed commit, or an id reused.
	if v.Key != "" {
		if got, kerr := d.GetByKey(ctx, v.Key); kerr == nil {
			got, err := session.KeyedReplay(got, v)
			return got, false, err
		}
	}
	got, gerr := d.Get(ctx, v.ID)
	if gerr != nil {
		return nil, false, translate(fmt.Sprintf("put %s", v.ID), err)
	}
	got, err = sameOrConflict(got, v)
	return got, false, err
}

func sameOrConflict(got, v *session.Version) (*session.Version, error) {
	if got.Hash == v.Hash {
		return got, nil
	}
	return nil, fmt.Errorf("put %s: %w: id already holds a different version", v.ID, session.ErrConflict)
}

type versionArgs []any

// argsOf is v's row for insertVersionSQL ($1–$21), with room for the three
// arguments the caller appends. Fields go by pointer where pgx can read
// them so (it dereferences; a nil pointer is NULL): boxing each value cost
// an allocation, a dozen a version (issue 25). v must not change until
// the statement has been sent.
func argsOf(v *session.Version) (versionArgs, error) {
	placement, err := graphrow.Placement(v.Placement)
	if err != nil {
		return nil, err
	}
	extras, err := graphrow.Extras(v.Extras)
	if err != nil {
		return nil, err
	}
	created := v.CreatedAt.UTC()
	micro := created.Truncate(time.Microsecond)
	args := make(versionArgs, 0, 24)
	return append(args, &v.ID, v.Base, (*string)(&v.Op), &v.Len, len(v.Chunks), len(v.Parents), placement,
		&v.Usage.PromptTokens, &v.Usage.CompletionTokens, &v.Usage.TotalTokens,
		graphrow.NullString(&v.Producer.Run), graphrow.NullString(&v.Producer.Step),
		graphrow.NullString(&v.Producer.Agent), graphrow.NullString(&v.Producer.Model),
		graphrow.NullString(&v.Producer.Worker), graphrow.NullString(&v.Producer.TraceID),
		extras, graphrow.NullString(&v.Key), micro, int16(created.Sub(micro)), &v.Hash), nil
}

var insertCols = []string{"id", "base_id", "op", "len", "own_count", "parent_count", "placement",
	"prompt_tokens", "completion_tokens", "total_tokens", "run", "step", "agent", "model", "worker",
	"trace_id", "extras", "key", "created_at", "created_nanos", "hash", "lane", "pos"}

// insertVersionSQL writes one version row. When $22 is true (the version
// extends its base, which is also its first parent) it joins the base's
// lane at the next position if that position is free; otherwise it starts
// its own lane. It states the version's tenant: its first parent's ($23),
// or for a root the store's ($24); the database checks it against the
// base and the parents, and a tenant connection overrides it with its own.
// It returns the lane.
//
// The claim flag, the base and the first parent reach the statement
// through a subquery that OFFSET 0 keeps apart (as in groupVersionsSQL), so
// that a plan for a root's values cannot see the lookups come to nothing
// and cost less than the generic plan: a connection then runs it on its
// cached plan instead of planning it for each commit
// (TestVersionInsertUsesTheCachedPlan).
const insertVersionSQL = `WITH arg AS (SELECT $22::boolean AS claim, $2::uuid AS base, $23::uuid AS first_parent OFFSET 0),
claim AS (
	SELECT b.lane, b.pos + 1 AS pos FROM arg, versions b
	WHERE arg.claim AND b.id = arg.base
	  AND NOT EXISTS (SELECT 1 FROM versions o WHERE o.lane = b.lane AND o.pos = b.pos + 1)
)
INSERT INTO versions (id, base_id, op, len, own_count, parent_count, placement,
	prompt_tokens, completion_tokens, total_tokens, run, step, agent, model, worker, trace_id, extras, key,
	created_at, created_nanos, hash, lane, pos, tenant)
VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17::json, $18, $19, $20, $21,
	COALESCE((SELECT lane FROM claim), $1), COALESCE((SELECT pos FROM claim), 0),
	COALESCE((SELECT p.tenant FROM arg, versions p WHERE p.id = arg.first_parent), $24::text))
RETURNING lane`

// insertChunksSQL writes a version's chunks in its lane (read from the
// version row written just before, in the same transaction).
const insertChunksSQL = `INSERT INTO chunks (version_id, lane, ord, kind, payload, hash)
SELECT $1, (SELECT lane FROM versions WHERE id = $1), t.ord, t.kind, t.payload, t.hash
FROM unnest($2::integer[], $3::text[], $4::text[], $5::text[]) AS t(ord, kind, payload, hash)`

const insertEdgesSQL = `INSERT INTO lineage (child_id, parent_id, ordinal, op)
SELECT $1, t.parent_id, t.n - 1, $3 FROM unnest($2::uuid[]) WITH ORDINALITY AS t(parent_id, n)`

// isGraphKey reports whether a unique violation is on the graph's own
// tables, not on a table of the caller's statements (PutWith).
func isGraphKey(e *pgconn.PgError) bool {
	return e.TableName == "versions" || e.TableName == "chunks" || e.TableName == "lineage"
}

// isLaneRace reports a unique violation on a lane position: two commits
// extended the same base at once and the other one joined its lane first.
func isLaneRace(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" &&
		(pgErr.ConstraintName == "versions_lane_idx" || pgErr.ConstraintName == "chunks_lane_idx")
}

func chunkColumns(v *session.Version) (ords []int32, kinds, payloads, hashes []string) {
	start := v.Len - len(v.Chunks)
	ords = make([]int32, len(v.Chunks))
	kinds = make([]string, len(v.Chunks))
	payloads = make([]string, len(v.Chunks))
	hashes = make([]string, len(v.Chunks))
	for i, c := range v.Chunks {
		ords[i] = int32(start + i)
		kinds[i] = string(c.Kind())
		payloads[i] = string(c.Payload())
		hashes[i] = c.Hash()
	}
	return ords, kinds, payloads, hashes
}

// insertOne writes v's version row, chunks and edges, then runs after,
// atomically; claim asks to join the base's lane (see insertVersionSQL).
func (d *db) insertOne(ctx context.Context, v *session.Version, claim bool, after []Stmt) error {
	args, err := argsOf(v)
	if err != nil {
		return err
	}
	args = append(args, claim, firstParent(v), d.tenant)
	if len(v.Chunks) > CopyThreshold || d.inTx {
		// COPY needs a transaction; inside a caller's Tx a savepoint lets a
		// unique violation be resolved without aborting the caller's work.
		return pgx.BeginFunc(ctx, d.q, func(tx pgx.Tx) error {
			var lane session.ID
			if err := tx.QueryRow(ctx, insertVersionSQL, args...).Scan(&lane); err != nil {
				return err
			}
			if len(v.Chunks) > CopyThreshold {
				if _, err := tx.CopyFrom(ctx, pgx.Identifier{"chunks"}, []string{"version_id", "lane", "ord", "kind", "payload", "hash"},
					chunkSource(v, lane)); err != nil {
					return err
				}
			} else if len(v.Chunks) > 0 {
				ords, kinds, payloads, hashes := chunkColumns(v)
				if _, err := tx.Exec(ctx, insertChunksSQL, v.ID, ords, kinds, payloads, hashes); err != nil {
					return err
				}
			}
			if len(v.Parents) > 0 {
				if _, err := tx.Exec(ctx, insertEdgesSQL, v.ID, v.Parents, string(v.Op)); err != nil {
					return err
				}
			}
			for _, st := range after {
				rows, err := tx.Query(ctx, st.SQL, st.Args...)
				if err != nil {
					return err
				}
				if err := scanStmt(st, rows); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if d.group != nil {
		return d.group.commit(ctx, v, claim, after)
	}
	// One pipelined batch: Postgres runs it as one implicit transaction.
	b := &pgx.Batch{}
	b.Queue(insertVersionSQL, args...)
	if len(v.Chunks) > 0 {
		ords, kinds, payloads, hashes := chunkColumns(v)
		b.Queue(insertChunksSQL, v.ID, ords, kinds, payloads, hashes)
	}
	if len(v.Parents) > 0 {
		b.Queue(insertEdgesSQL, v.ID, v.Parents, string(v.Op))
	}
	for _, st := range after {
		b.Queue(st.SQL, st.Args...).Query(func(rows pgx.Rows) error { return scanStmt(st, rows) })
	}
	return d.q.SendBatch(ctx, b).Close()
}

// firstParent returns v's first parent, whose tenant v takes, or nil for
// a root.
func firstParent(v *session.Version) any {
	if len(v.Parents) == 0 {
		return nil
	}
	return v.Parents[0]
}

// scanStmt reads a PutWith statement's rows with its Scan or Row, or
// discards them, and closes them.
func scanStmt(st Stmt, rows pgx.Rows) error {
	defer rows.Close()
	if st.Scan != nil {
		if err := st.Scan(rows); err != nil {
			return err
		}
	}
	for rows.Next() {
		if st.Row != nil && st.Scan == nil {
			if err := st.Row(rows); err != nil {
				return err
			}
		}
	}
	return rows.Err()
}

func chunkSource(v *session.Version, lane session.ID) pgx.CopyFromSource {
	start := v.Len - len(v.Chunks)
	return pgx.CopyFromSlice(len(v.Chunks), func(i int) ([]any, error) {
		c := v.Chunks[i]
		return []any{v.ID, lane, int32(start + i), string(c.Kind()), string(c.Payload()), c.Hash()}, nil
	})
}

// PutMany implements [store.Store] with COPY for all three tables.
func (d *db) PutMany(ctx context.Context, vs []*session.Version) error {
	if len(vs) == 0 {
		return nil
	}
	e := d.cache.Epoch()
	ext := graphrow.External(vs)
	stored, err := d.headers(ctx, ext)
	if err != nil {
		return translate("put many", err)
	}
	// Ids or keys already stored are conflicts: look them up in one query.
	ids := make([]session.ID, 0, len(vs))
	var keys []string
	for _, v := range vs {
		if v == nil {
			continue
		}
		ids = append(ids, v.ID)
		if v.Key != "" {
			keys = append(keys, v.Key)
		}
	}
	var taken int
	if err := d.q.QueryRow(ctx, `SELECT count(*) FROM versions WHERE id = ANY($1) OR key = ANY($2)`, ids, keys).Scan(&taken); err != nil {
		return translate("put many", err)
	}
	if taken > 0 {
		return fmt.Errorf("put many: %w: %d of the versions (by id or key) are already stored", session.ErrConflict, taken)
	}
	if err := graphrow.CheckBatch(vs, stored); err != nil {
		return fmt.Errorf("put many: %w", err)
	}
	lanes := graphrow.BatchLanes(vs)
	tenants, err := d.batchTenants(ctx, vs)
	if err != nil {
		return translate("put many", err)
	}
	rows := make([][]any, len(vs))
	for i, v := range vs {
		if rows[i], err = argsOf(v); err != nil {
			return fmt.Errorf("put many: versions[%d]: %w", i, err)
		}
		rows[i] = append(rows[i], lanes[i].Lane, int32(lanes[i].Pos), tenants[i])
	}
	err = pgx.BeginFunc(ctx, d.q, func(tx pgx.Tx) error {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"versions"}, slices.Concat(insertCols, []string{"tenant"}), pgx.CopyFromRows(rows)); err != nil {
			return err
		}
		var chunkRows, edgeRows [][]any
		for j, v := range vs {
			start := v.Len - len(v.Chunks)
			for i, c := range v.Chunks {
				chunkRows = append(chunkRows, []any{v.ID, lanes[j].Lane, int32(start + i), string(c.Kind()), string(c.Payload()), c.Hash()})
			}
			for i, p := range v.Parents {
				edgeRows = append(edgeRows, []any{v.ID, p, int16(i), string(v.Op)})
			}
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"chunks"}, []string{"version_id", "lane", "ord", "kind", "payload", "hash"}, pgx.CopyFromRows(chunkRows)); err != nil {
			return err
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"lineage"}, []string{"child_id", "parent_id", "ordinal", "op"}, pgx.CopyFromRows(edgeRows))
		return err
	})
	if err != nil {
		return translate("put many", err)
	}
	for _, v := range vs {
		d.remember(v, e)
	}
	if len(vs) >= analyzeAfter && !d.inTx {
		// Fresh statistics keep the recursive walks on their indexes; without
		// them the planner may scan whole tables at every recursion step
		// until autovacuum catches up.
		if _, err := d.q.Exec(ctx, `ANALYZE versions, chunks, lineage`); err != nil {
			return translate("put many: analyze", err)
		}
	}
	return nil
}

// batchTenants states the tenant of each of vs, as insertVersionSQL does
// for one version: its first parent's (in vs, or stored), or for a root
// the store's. vs are in commit order (parents first).
func (d *db) batchTenants(ctx context.Context, vs []*session.Version) ([]any, error) {
	byID := make(map[session.ID]string, len(vs))
	var stored []session.ID
	for _, v := range vs {
		if len(v.Parents) > 0 {
			stored = append(stored, v.Parents[0])
		}
	}
	if len(stored) > 0 {
		rows, err := d.q.Query(ctx, `SELECT id, tenant FROM versions WHERE id = ANY($1)`, stored)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var id session.ID
			var t string
			if err := rows.Scan(&id, &t); err != nil {
				rows.Close()
				return nil, err
			}
			byID[id] = t
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	out := make([]any, len(vs))
	for i, v := range vs {
		t := d.tenant
		if len(v.Parents) > 0 {
			// Not found: a parent invisible to a tenant connection, whose
			// own tenant the database then applies and checks.
			t = byID[v.Parents[0]]
		}
		byID[v.ID] = t
		if t != "" {
			out[i] = t
		}
	}
	return out, nil
}

// analyzeAfter is the bulk size from which PutMany refreshes statistics.
const analyzeAfter = 1000

// GetUncached reads a version from the database, bypassing the cache.
func (s *Store) GetUncached(ctx context.Context, id session.ID) (*session.Version, error) {
	v, err := s.load(ctx, `WHERE v.id = $1`, id)
	return v, translate(fmt.Sprintf("get %s", id), err)
}

// CountRows returns the number of version, chunk and lineage rows.
func (s *Store) CountRows(ctx context.Context) (versions, chunks, edges int64, err error) {
	err = s.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM versions), (SELECT count(*) FROM chunks), (SELECT count(*) FROM lineage)`).Scan(&versions, &chunks, &edges)
	return versions, chunks, edges, translate("count rows", err)
}

// RowBytes returns the stored size of a version's own rows (its version
// row, chunk rows and lineage rows, as pg_column_size counts them; index
// entries not included).
func (s *Store) RowBytes(ctx context.Context, id session.ID) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT
		(SELECT coalesce(sum(pg_column_size(v.*)), 0) FROM versions v WHERE v.id = $1) +
		(SELECT coalesce(sum(pg_column_size(c.*)), 0) FROM chunks c WHERE c.version_id = $1) +
		(SELECT coalesce(sum(pg_column_size(l.*)), 0) FROM lineage l WHERE l.child_id = $1)`, id).Scan(&n)
	return n, translate("row bytes", err)
}

// Analyze refreshes the planner statistics of the graph tables (what
// autovacuum does on its own schedule), as after a bulk load.
func (s *Store) Analyze(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, `ANALYZE versions, chunks, lineage`)
	return translate("analyze", err)
}

// PurgeCache drops the in-process version and transcript caches. Versions
// are immutable except for a redaction (pkg/lineage Retention.Redact), which
// replaces a chunk's content and keeps its hash: call it after redacting so
// this process reads the redacted rows.
func (s *Store) PurgeCache() { s.cache.Purge() }
