// Package sqlmem is the one SQL implementation of [memory.Store] behind
// the embedded (SQLite) and Postgres backends. Queries are written with '?'
// placeholders and rebound to $n for Postgres; the schema is migration
// 00006_memory in both dialects.
package sqlmem

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rath-run/rath/pkg/memory"
)

// Store implements memory.Store over db.
type Store struct {
	db       *sql.DB
	dollar   bool // Postgres placeholders
	closed   atomic.Bool
	closeFn  func() error
	now      func() time.Time
	maxBatch int
}

var _ memory.Store = (*Store)(nil)

// New returns a Store over db. dollar selects $n placeholders (Postgres);
// closeFn runs on Close.
func New(db *sql.DB, dollar bool, closeFn func() error) *Store {
	return &Store{db: db, dollar: dollar, closeFn: closeFn, now: time.Now, maxBatch: 500}
}

// DB returns the underlying database.
func (s *Store) DB() *sql.DB { return s.db }

// Close implements memory.Store.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.closeFn != nil {
		return s.closeFn()
	}
	return nil
}

func (s *Store) q(query string) string {
	if !s.dollar {
		return query
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(query[i])
	}
	return b.String()
}

func (s *Store) check() error {
	if s.closed.Load() {
		return &memory.Error{Kind: memory.KindStoreClosed, Message: "store is closed"}
	}
	return nil
}

func internal(op string, err error) error {
	if err == nil {
		return nil
	}
	var me *memory.Error
	if errors.As(err, &me) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("memory %s: %w", op, err)
	}
	return fmt.Errorf("memory %s: %w", op, &memory.Error{Kind: memory.KindInternal, Message: err.Error()})
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// prefixRange returns the half-open [lo, hi) URI range of a scope prefix
// ending in '/'.
func prefixRange(prefix string) (string, string) {
	return prefix, prefix[:len(prefix)-1] + "0"
}

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

// Remember implements memory.Store.
func (s *Store) Remember(ctx context.Context, ns string, w memory.Write) (memory.Item, error) {
	if err := s.check(); err != nil {
		return memory.Item{}, err
	}
	p, err := memory.Prepare(ns, w)
	if err != nil {
		return memory.Item{}, err
	}
	now := micros(s.now())
	var created int64
	err = s.tx(ctx, p.Namespace, p.URI, func(tx *sql.Tx) error {
		created, err = s.rememberTx(ctx, tx, p, now)
		return err
	})
	if err != nil {
		return memory.Item{}, internal("remember "+p.URI, err)
	}
	md, _ := memory.DecodeMetadata(p.Metadata)
	return memory.Item{Namespace: p.Namespace, URI: p.URI, Text: p.Text, Metadata: md,
		CreatedAt: fromMicros(created), UpdatedAt: fromMicros(now), VersionID: p.VersionID}, nil
}

// RememberMany writes ws in one transaction (bulk loads, benchmarks),
// holding every item's lock.
func (s *Store) RememberMany(ctx context.Context, ns string, ws []memory.Write) error {
	if err := s.check(); err != nil {
		return err
	}
	ps := make([]memory.Prepared, len(ws))
	for i, w := range ws {
		p, err := memory.Prepare(ns, w)
		if err != nil {
			return err
		}
		ps[i] = p
	}
	if len(ps) == 0 {
		return nil
	}
	// Locks in URI order, so two bulk writers cannot deadlock; the stable
	// sort keeps the last write of a URI last.
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].URI < ps[j].URI })
	now := micros(s.now())
	err := s.tx(ctx, ps[0].Namespace, "", func(tx *sql.Tx) error {
		for _, p := range ps {
			if err := s.lock(ctx, tx, p.Namespace, p.URI); err != nil {
				return err
			}
			if _, err := s.rememberTx(ctx, tx, p, now); err != nil {
				return err
			}
		}
		return nil
	})
	return internal("remember many", err)
}

// rememberTx writes p and returns its creation time.
func (s *Store) rememberTx(ctx context.Context, tx *sql.Tx, p memory.Prepared, now int64) (int64, error) {
	created := now
	var (
		oldText string
		oldDL   int64
		oldCr   int64
		deleted sql.NullInt64
	)
	err := tx.QueryRowContext(ctx, s.q(`SELECT text, dl, created_at, deleted_at FROM memory_items WHERE namespace = ? AND uri = ?`), p.Namespace, p.URI).
		Scan(&oldText, &oldDL, &oldCr, &deleted)
	live := false
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return 0, err
	default:
		live = !deleted.Valid
		if live {
			created = oldCr
		}
	}
	docs, dlDelta := int64(1), int64(p.DL)
	delta := make(map[string]int, len(p.Terms))
	for t := range p.Terms {
		delta[t]++
	}
	if live {
		docs, dlDelta = 0, int64(p.DL)-oldDL
		for _, t := range distinct(oldText) {
			delta[t]--
		}
		if err := s.dropPostings(ctx, tx, p.Namespace, p.URI, oldText); err != nil {
			return 0, err
		}
	}
	if err := s.bumpTerms(ctx, tx, p.Namespace, delta); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO memory_items (namespace, uri, text, metadata, dl, version_id, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (namespace, uri) DO UPDATE SET text = excluded.text, metadata = excluded.metadata, dl = excluded.dl,
  version_id = excluded.version_id, created_at = excluded.created_at, updated_at = excluded.updated_at,
  deleted_at = NULL, deleted_version_id = NULL`),
		p.Namespace, p.URI, p.Text, p.Metadata, p.DL, p.VersionID, created, now); err != nil {
		return 0, err
	}
	if err := s.addPostings(ctx, tx, p); err != nil {
		return 0, err
	}
	if err := s.bumpStats(ctx, tx, p.Namespace, docs, dlDelta); err != nil {
		return 0, err
	}
	return created, s.log(ctx, tx, p.Namespace, p.URI, "remember", p.VersionID, now)
}

// tx runs fn in a transaction holding the item's lock: SQLite's
// immediate transactions serialize writers already; on Postgres a
// transaction-scoped advisory lock on (namespace, uri) serializes writers
// of one item, even before its row exists.
func (s *Store) tx(ctx context.Context, ns, uri string, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if uri != "" {
		if err := s.lock(ctx, tx, ns, uri); err != nil {
			_ = tx.Rollback()
			return err
		}
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// lock takes the item's transaction-scoped lock (Postgres; SQLite's
// immediate transactions already serialize writers).
func (s *Store) lock(ctx context.Context, tx *sql.Tx, ns, uri string) error {
	if !s.dollar {
		return nil
	}
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 7))`, ns+"\n"+uri)
	return err
}

func distinct(text string) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range memory.Tokenize(text) {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

func (s *Store) dropPostings(ctx context.Context, tx *sql.Tx, ns, uri, text string) error {
	terms := distinct(text)
	for len(terms) > 0 {
		n := min(len(terms), s.maxBatch)
		args := []any{ns, uri}
		for _, t := range terms[:n] {
			args = append(args, t)
		}
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM memory_postings WHERE namespace = ? AND uri = ? AND term IN (`+placeholders(n)+`)`), args...); err != nil {
			return err
		}
		terms = terms[n:]
	}
	return nil
}

func (s *Store) addPostings(ctx context.Context, tx *sql.Tx, p memory.Prepared) error {
	terms := make([]string, 0, len(p.Terms))
	for t := range p.Terms {
		terms = append(terms, t)
	}
	for len(terms) > 0 {
		n := min(len(terms), s.maxBatch)
		var b strings.Builder
		b.WriteString(`INSERT INTO memory_postings (namespace, term, uri, tf, dl) VALUES `)
		args := make([]any, 0, 5*n)
		for i, t := range terms[:n] {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString("(?, ?, ?, ?, ?)")
			args = append(args, p.Namespace, t, p.URI, p.Terms[t], p.DL)
		}
		if _, err := tx.ExecContext(ctx, s.q(b.String()), args...); err != nil {
			return err
		}
		terms = terms[n:]
	}
	return nil
}

// bumpTerms applies document-frequency changes, in term order (so
// concurrent writers lock memory_terms rows in one order).
func (s *Store) bumpTerms(ctx context.Context, tx *sql.Tx, ns string, delta map[string]int) error {
	terms := make([]string, 0, len(delta))
	for t, d := range delta {
		if d != 0 {
			terms = append(terms, t)
		}
	}
	sort.Strings(terms)
	for len(terms) > 0 {
		n := min(len(terms), s.maxBatch)
		var b strings.Builder
		b.WriteString(`INSERT INTO memory_terms (namespace, term, df) VALUES `)
		args := make([]any, 0, 3*n)
		for i, t := range terms[:n] {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString("(?, ?, ?)")
			args = append(args, ns, t, delta[t])
		}
		b.WriteString(` ON CONFLICT (namespace, term) DO UPDATE SET df = memory_terms.df + excluded.df`)
		if _, err := tx.ExecContext(ctx, s.q(b.String()), args...); err != nil {
			return err
		}
		terms = terms[n:]
	}
	return nil
}

func (s *Store) bumpStats(ctx context.Context, tx *sql.Tx, ns string, docs, dl int64) error {
	_, err := tx.ExecContext(ctx, s.q(`INSERT INTO memory_stats (namespace, docs, total_dl) VALUES (?, ?, ?)
ON CONFLICT (namespace) DO UPDATE SET docs = memory_stats.docs + excluded.docs, total_dl = memory_stats.total_dl + excluded.total_dl`), ns, docs, dl)
	return err
}

func (s *Store) log(ctx context.Context, tx *sql.Tx, ns, uri, op, version string, at int64) error {
	_, err := tx.ExecContext(ctx, s.q(`INSERT INTO memory_log (namespace, uri, op, version_id, at) VALUES (?, ?, ?, ?, ?)`), ns, uri, op, version, at)
	return err
}

const itemCols = `namespace, uri, text, metadata, version_id, created_at, updated_at, deleted_at, deleted_version_id`

type scanner interface{ Scan(...any) error }

func scanItem(r scanner) (memory.Item, error) {
	var (
		it      memory.Item
		md      string
		cr, up  int64
		del     sql.NullInt64
		delVers sql.NullString
	)
	if err := r.Scan(&it.Namespace, &it.URI, &it.Text, &md, &it.VersionID, &cr, &up, &del, &delVers); err != nil {
		return memory.Item{}, err
	}
	m, err := memory.DecodeMetadata(md)
	if err != nil {
		return memory.Item{}, err
	}
	it.Metadata, it.CreatedAt, it.UpdatedAt = m, fromMicros(cr), fromMicros(up)
	if del.Valid {
		it.DeletedAt, it.DeletedVersionID = fromMicros(del.Int64), delVers.String
	}
	return it, nil
}

// Read implements memory.Store.
func (s *Store) Read(ctx context.Context, ns, uri string) (memory.Item, error) {
	if err := s.check(); err != nil {
		return memory.Item{}, err
	}
	ns, err := memory.CheckNamespace(ns)
	if err != nil {
		return memory.Item{}, err
	}
	u, err := memory.ParseURI(uri)
	if err != nil {
		return memory.Item{}, err
	}
	it, err := scanItem(s.db.QueryRowContext(ctx, s.q(`SELECT `+itemCols+` FROM memory_items WHERE namespace = ? AND uri = ?`), ns, u.String()))
	if errors.Is(err, sql.ErrNoRows) || err == nil && !it.DeletedAt.IsZero() {
		return memory.Item{}, &memory.Error{Kind: memory.KindNotFound, Message: fmt.Sprintf("no item %s in namespace %q", u, ns)}
	}
	return it, internal("read "+u.String(), err)
}

// List implements memory.Store: items in URI order.
func (s *Store) List(ctx context.Context, ns string, opts memory.ListOptions) ([]memory.Item, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	ns, err := memory.CheckNamespace(ns)
	if err != nil {
		return nil, err
	}
	prefix, err := memory.ParseScope(opts.Scope)
	if err != nil {
		return nil, err
	}
	query := `SELECT ` + itemCols + ` FROM memory_items WHERE namespace = ?`
	args := []any{ns}
	if prefix != "" {
		lo, hi := prefixRange(prefix)
		query += ` AND uri >= ? AND uri < ?`
		args = append(args, lo, hi)
	}
	if !opts.IncludeDeleted {
		query += ` AND deleted_at IS NULL`
	}
	query += ` ORDER BY uri`
	if opts.Limit > 0 {
		query += ` LIMIT ?`
		args = append(args, opts.Limit)
	}
	rows, err := s.db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, internal("list", err)
	}
	defer rows.Close()
	var out []memory.Item
	for rows.Next() {
		it, err := scanItem(rows)
		if err != nil {
			return nil, internal("list", err)
		}
		out = append(out, it)
	}
	return out, internal("list", rows.Err())
}

// Delete implements memory.Store: the row stays as a tombstone.
func (s *Store) Delete(ctx context.Context, ns, uri, versionID string) error {
	if err := s.check(); err != nil {
		return err
	}
	ns, err := memory.CheckNamespace(ns)
	if err != nil {
		return err
	}
	u, err := memory.ParseURI(uri)
	if err != nil {
		return err
	}
	key := u.String()
	now := micros(s.now())
	err = s.tx(ctx, ns, key, func(tx *sql.Tx) error {
		var (
			text    string
			dl      int64
			deleted sql.NullInt64
		)
		err := tx.QueryRowContext(ctx, s.q(`SELECT text, dl, deleted_at FROM memory_items WHERE namespace = ? AND uri = ?`), ns, key).Scan(&text, &dl, &deleted)
		if errors.Is(err, sql.ErrNoRows) || err == nil && deleted.Valid {
			return &memory.Error{Kind: memory.KindNotFound, Message: fmt.Sprintf("no item %s in namespace %q", key, ns)}
		}
		if err != nil {
			return err
		}
		if err := s.dropPostings(ctx, tx, ns, key, text); err != nil {
			return err
		}
		delta := map[string]int{}
		for _, t := range distinct(text) {
			delta[t] = -1
		}
		if err := s.bumpTerms(ctx, tx, ns, delta); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE memory_items SET deleted_at = ?, deleted_version_id = ? WHERE namespace = ? AND uri = ?`), now, versionID, ns, key); err != nil {
			return err
		}
		if err := s.bumpStats(ctx, tx, ns, -1, -dl); err != nil {
			return err
		}
		return s.log(ctx, tx, ns, key, "delete", versionID, now)
	})
	return internal("delete "+key, err)
}

// Recall implements memory.Store: postings of the query's terms, exact
// BM25 in Go, then zero-score items in URI order to fill the top k.
func (s *Store) Recall(ctx context.Context, ns string, q memory.Query) ([]memory.Hit, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	ns, err := memory.CheckNamespace(ns)
	if err != nil {
		return nil, err
	}
	prefix, err := memory.CheckQuery(&q)
	if err != nil {
		return nil, err
	}
	hits, err := s.recall(ctx, ns, prefix, q)
	return hits, internal("recall", err)
}

func (s *Store) recall(ctx context.Context, ns, prefix string, q memory.Query) ([]memory.Hit, error) {
	var (
		c     memory.Corpus
		rng   string
		rargs []any
	)
	if prefix == "" {
		err := s.db.QueryRowContext(ctx, s.q(`SELECT docs, total_dl FROM memory_stats WHERE namespace = ?`), ns).Scan(&c.N, &c.SumDL)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, err
		}
	} else {
		lo, hi := prefixRange(prefix)
		rng, rargs = ` AND uri >= ? AND uri < ?`, []any{lo, hi}
		err := s.db.QueryRowContext(ctx, s.q(`SELECT count(*), coalesce(sum(dl), 0) FROM memory_items WHERE namespace = ?`+rng+` AND deleted_at IS NULL`), append([]any{ns}, rargs...)...).Scan(&c.N, &c.SumDL)
		if err != nil {
			return nil, err
		}
	}
	if c.N == 0 {
		return nil, nil
	}
	terms := memory.Tokenize(q.Text)
	uniq := distinct(q.Text)
	scores, err := s.score(ctx, ns, rng, rargs, c, terms, uniq, q.TopK)
	if err != nil {
		return nil, err
	}
	hits := memory.Rank(scores, q.TopK)
	if len(hits) < q.TopK && c.N > len(scores) {
		zeros, err := s.zeroFill(ctx, ns, rng, rargs, scores, q.TopK-len(hits))
		if err != nil {
			return nil, err
		}
		hits = append(hits, zeros...)
	}
	return hits, s.fillSnippets(ctx, ns, hits)
}

// score returns exact BM25 scores for every document that can be in the
// top k, with max-score pruning: the query's terms are read rarest first
// (whole postings lists); the documents found get their other terms' tf by
// point lookups; once k documents score above the largest score the
// unread terms could give a document on their own (Σ idf·(k1+1) over their
// occurrences in the query), documents holding only unread terms cannot
// enter the top k and those lists are never read. Scores of the documents
// returned are the same as a full scan's, bit for bit.
func (s *Store) score(ctx context.Context, ns, rng string, rargs []any, c memory.Corpus, terms, uniq []string, k int) (map[string]float64, error) {
	if len(uniq) == 0 {
		return map[string]float64{}, nil
	}
	df, err := s.docFreqs(ctx, ns, rng, rargs, uniq)
	if err != nil {
		return nil, err
	}
	occ := map[string]int{}
	for _, t := range terms {
		occ[t]++
	}
	n := float64(c.N)
	ub := make(map[string]float64, len(uniq))
	var order []string
	for _, t := range uniq {
		if df[t] == 0 {
			continue
		}
		d := float64(df[t])
		ub[t] = float64(occ[t]) * math.Log(1+(n-d+0.5)/(d+0.5)) * (memory.K1 + 1)
		order = append(order, t)
	}
	sort.SliceStable(order, func(i, j int) bool { return df[order[i]] < df[order[j]] })
	// postings[t] holds, for read terms, the whole list; for unread terms,
	// the entries of the candidates looked up so far.
	postings := make(map[string][]memory.Posting, len(order))
	cands := map[string]bool{}
	for i, t := range order {
		list, err := s.postingsOf(ctx, ns, rng, rargs, t)
		if err != nil {
			return nil, err
		}
		// The list replaces the lookups made for t so far.
		postings[t] = list
		var fresh []string
		for _, p := range list {
			if !cands[p.URI] {
				cands[p.URI] = true
				fresh = append(fresh, p.URI)
			}
		}
		rest := order[i+1:]
		if len(rest) == 0 {
			break
		}
		restDF := 0
		for _, r := range rest {
			restDF += df[r]
		}
		if restDF < s.lookupCost()*len(fresh)*len(rest) {
			// Reading the remaining (more common) terms' lists whole costs
			// less than looking each new candidate up in them.
			for _, r := range rest {
				if postings[r], err = s.postingsOf(ctx, ns, rng, rargs, r); err != nil {
					return nil, err
				}
			}
			break
		}
		if err := s.lookup(ctx, ns, rest, fresh, postings); err != nil {
			return nil, err
		}
		if len(cands) < k {
			continue
		}
		restUB := 0.0
		for _, r := range rest {
			restUB += ub[r]
		}
		scores := memory.Score(c, terms, postings, df)
		if kth(scores, k) > restUB*(1+1e-9) {
			return scores, nil
		}
	}
	return memory.Score(c, terms, postings, df), nil
}

// lookupCost is what one point lookup of a (term, document) posting costs,
// in postings read sequentially: past it, [Store.score] reads the remaining
// lists whole instead of looking its new candidates up in them. In-process
// SQLite lookups are cheap; a Postgres lookup batch is a round trip and
// index descents (figures in docs/BENCHMARKS.md).
func (s *Store) lookupCost() int {
	if s.dollar {
		return 8
	}
	return 1
}

// kth returns the k-th largest score (k ≥ 1, len(scores) ≥ k).
func kth(scores map[string]float64, k int) float64 {
	v := make([]float64, 0, len(scores))
	for _, s := range scores {
		v = append(v, s)
	}
	sort.Sort(sort.Reverse(sort.Float64Slice(v)))
	return v[k-1]
}

func (s *Store) docFreqs(ctx context.Context, ns, rng string, rargs []any, uniq []string) (map[string]int, error) {
	args := []any{ns}
	for _, t := range uniq {
		args = append(args, t)
	}
	query := `SELECT term, df FROM memory_terms WHERE namespace = ? AND term IN (` + placeholders(len(uniq)) + `)`
	if rng != "" {
		query = `SELECT term, count(*) FROM memory_postings WHERE namespace = ? AND term IN (` + placeholders(len(uniq)) + `)` + rng + ` GROUP BY term`
		args = append(args, rargs...)
	}
	rows, err := s.db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	df := make(map[string]int, len(uniq))
	for rows.Next() {
		var t string
		var n int
		if err := rows.Scan(&t, &n); err != nil {
			return nil, err
		}
		df[t] = n
	}
	return df, rows.Err()
}

func (s *Store) postingsOf(ctx context.Context, ns, rng string, rargs []any, term string) ([]memory.Posting, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT uri, tf, dl FROM memory_postings WHERE namespace = ? AND term = ?`+rng), append([]any{ns, term}, rargs...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []memory.Posting
	for rows.Next() {
		var p memory.Posting
		if err := rows.Scan(&p.URI, &p.TF, &p.DL); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// lookup adds to postings the entries of terms for the documents uris.
func (s *Store) lookup(ctx context.Context, ns string, terms, uris []string, postings map[string][]memory.Posting) error {
	for len(uris) > 0 {
		n := min(len(uris), s.maxBatch)
		if err := s.lookupBatch(ctx, ns, terms, uris[:n], postings); err != nil {
			return err
		}
		uris = uris[n:]
	}
	return nil
}

func (s *Store) lookupBatch(ctx context.Context, ns string, terms, uris []string, postings map[string][]memory.Posting) error {
	if s.dollar {
		// One index probe per (term, uri): Postgres 15 plans "term IN …
		// AND uri IN …" as a scan of the terms' whole ranges.
		rows, err := s.db.QueryContext(ctx, `SELECT p.term, p.uri, p.tf, p.dl
FROM unnest($2::text[]) AS t(term) CROSS JOIN unnest($3::text[]) AS u(uri)
JOIN memory_postings p ON p.namespace = $1 AND p.term = t.term AND p.uri = u.uri`, ns, terms, uris)
		if err != nil {
			return err
		}
		return scanPostings(rows, postings)
	}
	args := []any{ns}
	for _, t := range terms {
		args = append(args, t)
	}
	for _, u := range uris {
		args = append(args, u)
	}
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT term, uri, tf, dl FROM memory_postings WHERE namespace = ? AND term IN (`+
		placeholders(len(terms))+`) AND uri IN (`+placeholders(len(uris))+`)`), args...)
	if err != nil {
		return err
	}
	return scanPostings(rows, postings)
}

func scanPostings(rows *sql.Rows, postings map[string][]memory.Posting) error {
	defer rows.Close()
	for rows.Next() {
		var t string
		var p memory.Posting
		if err := rows.Scan(&t, &p.URI, &p.TF, &p.DL); err != nil {
			return err
		}
		postings[t] = append(postings[t], p)
	}
	return rows.Err()
}

// zeroFill returns up to need items in scope that are not in scored, in
// URI order, with score 0.
func (s *Store) zeroFill(ctx context.Context, ns, rng string, rargs []any, scored map[string]float64, need int) ([]memory.Hit, error) {
	var out []memory.Hit
	after := ""
	for len(out) < need {
		page := need + min(len(scored), 1000)
		uris, err := s.uriPage(ctx, ns, rng, rargs, after, page)
		if err != nil {
			return nil, err
		}
		for _, u := range uris {
			if _, ok := scored[u]; !ok && len(out) < need {
				out = append(out, memory.Hit{URI: u})
			}
		}
		if len(uris) < page {
			break
		}
		after = uris[len(uris)-1]
	}
	return out, nil
}

// uriPage returns up to n live URIs in scope after after, in order.
func (s *Store) uriPage(ctx context.Context, ns, rng string, rargs []any, after string, n int) ([]string, error) {
	args := append(append([]any{ns}, rargs...), after, n)
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT uri FROM memory_items WHERE namespace = ?`+rng+` AND deleted_at IS NULL AND uri > ? ORDER BY uri LIMIT ?`), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

func (s *Store) fillSnippets(ctx context.Context, ns string, hits []memory.Hit) error {
	if len(hits) == 0 {
		return nil
	}
	args := []any{ns}
	pos := make(map[string]int, len(hits))
	for i, h := range hits {
		args = append(args, h.URI)
		pos[h.URI] = i
	}
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT uri, text, version_id FROM memory_items WHERE namespace = ? AND uri IN (`+placeholders(len(hits))+`)`), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var u, text, v string
		if err := rows.Scan(&u, &text, &v); err != nil {
			return err
		}
		i := pos[u]
		hits[i].Snippet, hits[i].VersionID = memory.Snippet(text), v
	}
	return rows.Err()
}

// Vectors returns the cached embeddings of namespace ns for model
// (migration 00008_memory_vectors), keyed by URI.
func (s *Store) Vectors(ctx context.Context, ns, model string) (map[string]memory.StoredVector, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT uri, text_sha, dim, vec FROM memory_vectors WHERE namespace = ? AND model = ?`), ns, model)
	if err != nil {
		return nil, internal("vectors", err)
	}
	defer rows.Close()
	out := map[string]memory.StoredVector{}
	for rows.Next() {
		var (
			v   memory.StoredVector
			dim int
			b   []byte
		)
		if err := rows.Scan(&v.URI, &v.TextSHA, &dim, &b); err != nil {
			return nil, internal("vectors", err)
		}
		if v.Vec, err = memory.DecodeVector(b, dim); err != nil {
			return nil, fmt.Errorf("vector of %s: %w", v.URI, err)
		}
		out[v.URI] = v
	}
	return out, internal("vectors", rows.Err())
}

// PutVectors caches embeddings of namespace ns for model, replacing those
// of the same URIs, in one transaction.
func (s *Store) PutVectors(ctx context.Context, ns, model string, vs []memory.StoredVector) error {
	if err := s.check(); err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return internal("put vectors", err)
	}
	defer func() { _ = tx.Rollback() }()
	now := micros(time.Now())
	q := s.q(`INSERT INTO memory_vectors (namespace, model, uri, text_sha, dim, vec, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (namespace, model, uri) DO UPDATE SET text_sha = excluded.text_sha, dim = excluded.dim, vec = excluded.vec, updated_at = excluded.updated_at`)
	for _, v := range vs {
		if len(v.Vec) == 0 || len(v.Vec) > memory.MaxVectorDim {
			return fmt.Errorf("put vectors: %s has dimension %d, want 1..%d", v.URI, len(v.Vec), memory.MaxVectorDim)
		}
		if _, err := tx.ExecContext(ctx, q, ns, model, v.URI, v.TextSHA, len(v.Vec), memory.EncodeVector(v.Vec), now); err != nil {
			return internal("put vectors", err)
		}
	}
	return internal("put vectors", tx.Commit())
}
