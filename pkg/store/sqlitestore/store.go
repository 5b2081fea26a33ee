package sqlitestore

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/rath-run/rath/internal/migratelock"
	"github.com/rath-run/rath/migrations"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/store/internal/graphrow"
)

// Memory is the path of a private in-memory database.
const Memory = ":memory:"

// BusyTimeout is how long a write waits for another process's lock.
const BusyTimeout = 10 * time.Second

// Options configures [Open]. The zero value is usable.
type Options struct {
	// Migrate applies the embedded migrations on open. Default false.
	Migrate bool
	// CachedVersions and CachedTranscripts bound the caches, in entries:
	// 0 picks the defaults (4096 and 256), negative disables a cache. The
	// caches are also bounded in bytes (graphrow.DefaultCachedVersionBytes
	// and DefaultCachedTranscriptBytes).
	CachedVersions    int
	CachedTranscripts int
	// Readers bounds the read-only connections of a file database; 0 means 4.
	Readers int
}

// Store is the embedded [store.Store].
type Store struct {
	writer  *sql.DB
	group   *groupConnector // writer's connector: its group commits
	readers *sql.DB
	cache   *graphrow.Cache
	migMu   sync.Mutex // serializes Migrate within the process
	path    string     // the database file, or Memory
	db
}

var _ store.Store = (*Store)(nil)

const timeLayout = "2006-01-02T15:04:05.000000000Z"

func dsn(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeout.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	if path != Memory {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(NORMAL)")
	}
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Set("_txlock", "immediate")
		// The statement journal (a group commit's savepoints, one a
		// member) stays in memory: left to its default it spills to a
		// temporary file past 64 KiB and every page is a write(2). The
		// price: everything else temporary on the writer is in memory
		// too, for the connection's life: sorts of a migration's CREATE
		// INDEX, and the retention GC's table of doomed version ids
		// (about 100 bytes a version it deletes; its pages are reused by
		// the next GC, not returned).
		q.Add("_pragma", "temp_store(MEMORY)")
	}
	return "file:" + path + "?" + q.Encode()
}

// Open opens (creating if needed) the database at path, or a private
// in-memory database for [Memory]. The file's directory is created too.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" {
		return nil, errors.New("open sqlite store: empty path")
	}
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open sqlite store: path %q must not contain '?' or '#'", path)
	}
	if path != Memory {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("open sqlite store: %w: %w", session.ErrUnavailable, err)
		}
	}
	w, group, err := openWriter(dsn(path, false))
	if err != nil {
		return nil, translate("open sqlite store", err)
	}
	// Every connection of w is a view of its one SQLite connection
	// (groupcommit.go): callers wait for it there, counted, so a
	// transaction that ends while others wait leaves its commit to them.
	w.SetMaxOpenConns(0)
	w.SetMaxIdleConns(maxGroup)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	if err := pingWaiting(ctx, w); err != nil {
		w.Close()
		return nil, translate("open sqlite store "+path, err)
	}
	r := w
	if path != Memory {
		if r, err = openDB(dsn(path, true)); err != nil {
			w.Close()
			return nil, translate("open sqlite store", err)
		}
		n := opts.Readers
		if n <= 0 {
			n = 4
		}
		r.SetMaxOpenConns(n)
		r.SetMaxIdleConns(n)
	}
	s := &Store{writer: w, group: group, readers: r, path: path, cache: graphrow.NewCache(opts.CachedVersions, opts.CachedTranscripts)}
	s.db = db{r: r, w: w, cache: s.cache}
	if opts.Migrate {
		if err := s.Migrate(ctx); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// pingWaiting opens w's connection, waiting up to BusyTimeout for another
// connection's lock. The connection's pragmas switch a new file to WAL,
// and SQLite changes the journal mode without calling the busy handler:
// while another process holds the file in a transaction, or makes the same
// switch (processes that open a new file at once), it says SQLITE_BUSY at
// once. The switch is tried again until it goes or the wait is over.
func pingWaiting(ctx context.Context, w *sql.DB) error {
	deadline := time.Now().Add(BusyTimeout)
	wait := 5 * time.Millisecond
	for {
		err := w.PingContext(ctx)
		if err == nil || !isBusy(err) || time.Now().Add(wait).After(deadline) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
}

// DB returns the writer connection, for tests and tools that run their own
// SQL (the graph tables refuse UPDATE and DELETE whatever the caller).
func (s *Store) DB() *sql.DB { return s.writer }

// GroupCommits reports the write transactions committed through the
// writer's group commits so far, and the commits that carried them.
func (s *Store) GroupCommits() (transactions, commits int64) {
	return s.group.w.grouped.Load(), s.group.w.commits.Load()
}

// ReadDB returns the read-only connections (query_only) of a file
// database, or the writer for [Memory]: for readers of the same file that
// should not queue behind the single writer, such as a run store's reads.
func (s *Store) ReadDB() *sql.DB { return s.readers }

// Close implements [store.Store].
func (s *Store) Close() error {
	err := s.writer.Close()
	if s.readers != s.writer {
		err = errors.Join(err, s.readers.Close())
	}
	return err
}

// Migrate implements [store.Store]. Within a process migrations are
// serialized; another process migrating the same file at once is resolved
// by SQLite's write lock and a retry, which then finds nothing to apply.
func (s *Store) Migrate(ctx context.Context) error {
	s.migMu.Lock()
	defer s.migMu.Unlock()
	if s.path != Memory {
		unlock, err := migratelock.Lock(s.path)
		if err != nil {
			return err
		}
		defer unlock()
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, s.writer, migrations.SQLite(), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for attempt := 0; ; attempt++ {
		_, err = p.Up(ctx)
		if err == nil || attempt == 2 || ctx.Err() != nil {
			break
		}
	}
	return translate("migrate", err)
}

// Tx implements [store.Store]: fn runs on the writer connection inside
// BEGIN IMMEDIATE, so its reads see its own writes.
func (s *Store) Tx(ctx context.Context, fn func(ctx context.Context, tx store.TxStore) error) error {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return translate("tx", err)
	}
	var pending []*session.Version
	e := s.cache.Epoch()
	if err := fn(ctx, &txStore{db{r: tx, w: tx, cache: s.cache, inTx: true, pending: &pending}}); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return translate("tx commit", err)
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
	return t.w.ExecContext(ctx, query, args...)
}

type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// db runs graph operations: reads on r, writes on w (the writer
// connection, or the caller's transaction when inTx).
type db struct {
	r, w    querier
	cache   *graphrow.Cache
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

func (d *db) addTranscript(id session.ID, t []session.Chunk, e graphrow.Epoch) {
	if !d.inTx {
		d.cache.AddTranscript(id, t, e)
	}
}

// fresh reads the database's redaction epoch (migration 00018) and syncs
// the cache with it (graphrow.Cache's contract), reporting whether the
// cache may serve content. When the epoch cannot be read (a schema before
// 00018) nothing is served from the cache.
func (d *db) fresh(ctx context.Context) bool {
	if d.cache == nil {
		return false
	}
	var e int64
	if err := d.r.QueryRowContext(ctx, `SELECT epoch FROM redaction_epoch`).Scan(&e); err != nil {
		return false
	}
	d.cache.Sync(e)
	return true
}

const versionCols = `v.id, v.base_id, v.op, v.len, v.own_count, v.placement, v.prompt_tokens,
	v.completion_tokens, v.total_tokens, v.run, v.step, v.agent, v.model, v.worker, v.trace_id,
	v.extras, v.key, v.created_at, v.hash,
	(SELECT group_concat(l.parent_id, ',' ORDER BY l.ordinal) FROM lineage l WHERE l.child_id = v.id)`

type scanner interface{ Scan(dest ...any) error }

func scanVersion(row scanner, extra ...any) (*session.Version, int, error) {
	var (
		v                                   session.Version
		base, parents                       sql.NullString
		own                                 int
		placement, extras, created          string
		run, step, agent, model, worker, tr *string
		key                                 *string
	)
	dest := []any{&v.ID, &base, &v.Op, &v.Len, &own, &placement, &v.Usage.PromptTokens,
		&v.Usage.CompletionTokens, &v.Usage.TotalTokens, &run, &step, &agent, &model, &worker, &tr,
		&extras, &key, &created, &v.Hash, &parents}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return nil, 0, err
	}
	var err error
	if base.Valid {
		id, err := session.ParseID(base.String)
		if err != nil {
			return nil, 0, fmt.Errorf("%w: stored base: %w", session.ErrHashMismatch, err)
		}
		v.Base = &id
	}
	if parents.Valid && parents.String != "" {
		for _, p := range strings.Split(parents.String, ",") {
			id, err := session.ParseID(p)
			if err != nil {
				return nil, 0, fmt.Errorf("%w: stored parent: %w", session.ErrHashMismatch, err)
			}
			v.Parents = append(v.Parents, id)
		}
	}
	if v.Placement, err = graphrow.ParsePlacement(placement); err != nil {
		return nil, 0, err
	}
	if v.Extras, err = graphrow.ParseExtras(extras); err != nil {
		return nil, 0, err
	}
	v.Producer = session.Producer{Run: graphrow.FromNull(run), Step: graphrow.FromNull(step),
		Agent: graphrow.FromNull(agent), Model: graphrow.FromNull(model), Worker: graphrow.FromNull(worker),
		TraceID: graphrow.FromNull(tr)}
	v.Key = graphrow.FromNull(key)
	if v.CreatedAt, err = time.Parse(timeLayout, created); err != nil {
		return nil, 0, fmt.Errorf("%w: stored created_at %q", session.ErrHashMismatch, created)
	}
	return &v, own, nil
}

func infoOf(v *session.Version, own int) store.Info {
	in := store.InfoOf(v)
	in.OwnChunks = own
	return in
}

func scanChunks(rows *sql.Rows) ([]session.Chunk, error) {
	defer rows.Close()
	var out []session.Chunk
	for rows.Next() {
		var kind string
		var payload []byte
		if err := rows.Scan(&kind, &payload); err != nil {
			return nil, err
		}
		c, err := session.ChunkFromCanonical(session.Kind(kind), payload)
		if err != nil {
			return nil, fmt.Errorf("%w: stored chunk: %w", session.ErrHashMismatch, err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
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
	v, err := d.load(ctx, `v.id = ?`, id.String())
	return v, translate(fmt.Sprintf("get %s", id), err)
}

// GetUncached reads a version from the database, bypassing the cache.
func (s *Store) GetUncached(ctx context.Context, id session.ID) (*session.Version, error) {
	v, err := s.load(ctx, `v.id = ?`, id.String())
	return v, translate(fmt.Sprintf("get %s", id), err)
}

// GetByKey implements [store.Store].
func (d *db) GetByKey(ctx context.Context, key string) (*session.Version, error) {
	if key == "" {
		return nil, fmt.Errorf("get by key: %w: empty key", session.ErrNotFound)
	}
	v, err := d.load(ctx, `v.key = ?`, key)
	return v, translate(fmt.Sprintf("get by key %q", key), err)
}

func (d *db) load(ctx context.Context, where string, arg any) (*session.Version, error) {
	e := d.cache.Epoch()
	v, own, err := scanVersion(d.r.QueryRowContext(ctx, `SELECT `+versionCols+` FROM versions v WHERE `+where, arg))
	if err != nil {
		return nil, err
	}
	if own > 0 {
		rows, err := d.r.QueryContext(ctx, `SELECT kind, payload FROM chunks WHERE version_id = ? ORDER BY ord`, v.ID.String())
		if err != nil {
			return nil, err
		}
		if v.Chunks, err = scanChunks(rows); err != nil {
			return nil, err
		}
	}
	if len(v.Chunks) != own {
		return nil, fmt.Errorf("%w: version %s has %d chunk rows, want %d", session.ErrHashMismatch, v.ID, len(v.Chunks), own)
	}
	d.remember(v, e)
	return v, nil
}

// transcriptSQL follows the lanes of a version's base chain (one step per
// lane, not per version) and reads each lane's chunks as one range of the
// chunks table, whose key is (lane, ord). It returns the whole transcript as
// one value, per chunk "ORD KIND LEN PAYLOAD" with LEN the payload's length
// in bytes: one value instead of a row per chunk saves the driver's per-row
// cost, which dominates a long load. Segments are read oldest first, so the
// chunks come in order; unpackChunks checks that and sorts if not.
const transcriptSQL = `
WITH RECURSIVE seg(lane, hi) AS (
	SELECT lane, len FROM versions WHERE id = ?
	UNION ALL
	SELECT b.lane, b.len FROM seg JOIN versions s ON s.id = seg.lane JOIN versions b ON b.id = s.base_id
)
SELECT count(*), group_concat(c.ord || ' ' || c.kind || ' ' || octet_length(c.payload) || ' ' || c.payload, '')
FROM (SELECT lane, hi FROM seg ORDER BY hi) s CROSS JOIN chunks c ON c.lane = s.lane AND c.ord < s.hi`

// Transcript implements [session.Graph]: one recursive query, then cached.
func (d *db) Transcript(ctx context.Context, id session.ID) ([]session.Chunk, error) {
	useCache := d.fresh(ctx)
	if useCache {
		if t, ok := d.cache.Transcript(id); ok {
			return t, nil
		}
	}
	e := d.cache.Epoch()
	v, err := d.get(ctx, id, useCache)
	if err != nil {
		return nil, fmt.Errorf("transcript: %w", err)
	}
	if useCache {
		if t, ok := d.cache.Transcript(id); ok {
			return t, nil
		}
	}
	if v.Base == nil {
		d.addTranscript(id, v.Chunks, e)
		return v.Chunks, nil
	}
	t, err := d.loadTranscript(ctx, id)
	if err != nil {
		return nil, translate(fmt.Sprintf("transcript %s", id), err)
	}
	if len(t) != v.Len {
		return nil, fmt.Errorf("transcript %s: %w: %d chunks stored, len %d", id, session.ErrHashMismatch, len(t), v.Len)
	}
	d.addTranscript(id, t, e)
	return t, nil
}

func (d *db) loadTranscript(ctx context.Context, id session.ID) ([]session.Chunk, error) {
	var n int
	var packed []byte
	if err := d.r.QueryRowContext(ctx, transcriptSQL, id.String()).Scan(&n, &packed); err != nil {
		return nil, err
	}
	return unpackChunks(packed, n)
}

// unpackChunks splits transcriptSQL's packed value into its n chunks, in
// transcript order (ords 0 to n-1). The chunks share packed's memory.
func unpackChunks(packed []byte, n int) ([]session.Chunk, error) {
	type entry struct {
		ord int
		c   session.Chunk
	}
	if n < 0 {
		return nil, fmt.Errorf("%w: negative chunk count %d", session.ErrHashMismatch, n)
	}
	// Each chunk takes at least 8 bytes ("0 k 2 {}"): a count the value
	// cannot hold is not trusted for the allocation.
	entries := make([]entry, 0, min(n, len(packed)/8+1))
	sorted := true
	for len(packed) > 0 {
		fields := [3][]byte{}
		rest := packed
		ok := true
		for i := range fields {
			var found bool
			fields[i], rest, found = bytes.Cut(rest, []byte{' '})
			ok = ok && found
		}
		ord, err1 := strconv.Atoi(string(fields[0]))
		length, err2 := strconv.Atoi(string(fields[2]))
		if !ok || err1 != nil || err2 != nil || length < 0 || length > len(rest) {
			return nil, fmt.Errorf("%w: stored chunk %d does not unpack", session.ErrHashMismatch, len(entries))
		}
		c, err := session.ChunkFromCanonical(graphrow.KindOf(fields[1]), rest[:length:length])
		if err != nil {
			return nil, fmt.Errorf("%w: stored chunk at ord %d: %w", session.ErrHashMismatch, ord, err)
		}
		sorted = sorted && ord == len(entries)
		entries = append(entries, entry{ord, c})
		packed = rest[length:]
	}
	if !sorted {
		slices.SortFunc(entries, func(a, b entry) int { return cmp.Compare(a.ord, b.ord) })
	}
	if len(entries) != n {
		return nil, fmt.Errorf("%w: %d stored chunks unpacked to %d", session.ErrHashMismatch, n, len(entries))
	}
	out := make([]session.Chunk, n)
	for i, e := range entries {
		if e.ord != i {
			return nil, fmt.Errorf("%w: transcript has chunk ord %d at position %d", session.ErrHashMismatch, e.ord, i)
		}
		out[i] = e.c
	}
	return out, nil
}

// LoadTranscriptUncached loads a transcript with the recursive query,
// bypassing the cache.
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
	SELECT lane, pos FROM versions WHERE id = ?1
	UNION ALL
	SELECT b.lane, b.pos FROM a JOIN versions s ON s.id = a.lane JOIN versions b ON b.id = s.base_id
),
b(lane, pos, n) AS (
	SELECT lane, pos, 0 FROM versions WHERE id = ?2
	UNION ALL
	SELECT v.lane, v.pos, b.n + 1 FROM b JOIN versions s ON s.id = b.lane JOIN versions v ON v.id = s.base_id
)
SELECT v.id FROM b CROSS JOIN a CROSS JOIN versions v
WHERE a.lane = b.lane AND v.lane = b.lane AND v.pos = min(a.pos, b.pos)
ORDER BY b.n LIMIT 1`

// CommonBase implements [session.Graph].
func (d *db) CommonBase(ctx context.Context, a, b session.ID) (session.ID, bool, error) {
	for _, id := range []session.ID{a, b} {
		if _, err := d.Get(ctx, id); err != nil {
			return session.ID{}, false, fmt.Errorf("common base: %w", err)
		}
	}
	var s string
	err := d.r.QueryRowContext(ctx, commonBaseSQL, a.String(), b.String()).Scan(&s)
	if errors.Is(err, sql.ErrNoRows) {
		return session.ID{}, false, nil
	}
	if err != nil {
		return session.ID{}, false, translate("common base", err)
	}
	id, err := session.ParseID(s)
	return id, err == nil, err
}

// CountRows returns the number of version, chunk and lineage rows.
func (s *Store) CountRows(ctx context.Context) (versions, chunks, edges int64, err error) {
	err = s.readers.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM versions), (SELECT count(*) FROM chunks), (SELECT count(*) FROM lineage)`).Scan(&versions, &chunks, &edges)
	return versions, chunks, edges, translate("count rows", err)
}

// PurgeCache drops the in-process version and transcript caches. Versions
// are immutable except for a redaction (pkg/lineage Retention.Redact), which
// replaces a chunk's content and keeps its hash: call it after redacting so
// this process reads the redacted rows.
func (s *Store) PurgeCache() { s.cache.Purge() }
