package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/rath-run/rath/internal/jsonl"
)

// Import is three steps over one pass of the file: importReader parses
// and checks each line's format, importer.check verifies each version
// against its parents and base (in the file or stored), and a sink writes
// the verified versions: in batches inside one transaction of a
// [BulkGraph], else one Put at a time once the whole file has been checked.

// Batch bounds of an import into a [BulkGraph]: a batch is written when it
// holds this many versions or this many bytes of JSONL, whichever comes
// first. They bound the memory an import holds in version bodies.
const (
	importBatchVersions = 2000
	importBatchBytes    = 8 << 20
)

// Import reads session JSONL from r and puts its versions into g, returning
// a handle on the file's head version. See the format above for what is
// checked and which errors are returned.
//
// When g is a [BulkGraph] (the stores are), the whole import is one
// transaction: the file is streamed in batches of at most 2,000 versions or
// 8 MiB, each checked and written with [BulkTx.PutBatch], and any error (a
// bad line, a read error from a body cut short, ctx ending) rolls every
// batch back, so nothing of a failed import is stored. A batch is written
// while the next is read and checked. Memory is then two batches plus a
// header of about 200 bytes for each version of the file (id, hash,
// length, links, line). For any other Graph, Import holds and checks
// the whole file, then puts its versions one by one.
func Import(ctx context.Context, g Graph, r io.Reader) (Session, error) {
	if bg, ok := g.(BulkGraph); ok {
		var head *Version
		err := bg.Bulk(ctx, func(ctx context.Context, tx BulkTx) error {
			sink := &bulkSink{tx: tx}
			var err error
			head, err = newImporter(r, sink, importBatchVersions, importBatchBytes).run(ctx)
			// The transaction must be idle when fn returns.
			if werr := sink.wait(); err == nil {
				err = werr
			}
			return err
		})
		if err != nil {
			return Session{}, err
		}
		return Session{g: g, v: head}, nil
	}
	head, err := newImporter(r, graphSink{g}, 0, 0).run(ctx)
	if err != nil {
		return Session{}, err
	}
	return Session{g: g, v: head}, nil
}

// checkImported is the place for checks an imported version must pass
// beyond its shape and hash (policy on what a file may bring in). It runs
// once per version, after the version verified against its links and
// before it is written; an error fails the import, which then stores
// nothing.
func checkImported(_ *Version) error { return nil }

// importRecord is one version record of the file.
type importRecord struct {
	line int
	size int // bytes of the line
	v    *Version
}

// importReader parses session JSONL: the header, then one version record
// at a time. It checks each line's format, not the links between versions.
type importReader struct {
	lr        *jsonl.Reader
	head      ID
	hasHeader bool
	versions  int // version records read so far
}

// next returns the next version record, or io.EOF after the last one.
func (r *importReader) next() (importRecord, error) {
	for {
		line, _, err := r.lr.Next()
		if errors.Is(err, io.EOF) {
			if !r.hasHeader {
				return importRecord{}, fmt.Errorf("%w: no header record (empty input)", ErrFormat)
			}
			return importRecord{}, io.EOF
		}
		n := r.lr.Line()
		if errors.Is(err, jsonl.ErrLineTooLong) {
			return importRecord{}, fmt.Errorf("line %d: %w: longer than %d bytes", n, ErrTooLarge, MaxJSONLLineBytes)
		}
		if err != nil {
			return importRecord{}, fmt.Errorf("line %d: read: %w", n, err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if !utf8.Valid(line) {
			return importRecord{}, fmt.Errorf("line %d: %w: invalid UTF-8", n, ErrFormat)
		}
		if v := r.fastVersion(line); v != nil {
			r.versions++
			return importRecord{line: n, size: len(line), v: v}, nil
		}
		var peek struct {
			Record        *string `json:"record"`
			SchemaVersion *int    `json:"schema_version"`
		}
		if err := json.Unmarshal(line, &peek); err != nil {
			return importRecord{}, fmt.Errorf("line %d: %w: malformed JSON: %w", n, ErrFormat, err)
		}
		if peek.Record == nil {
			return importRecord{}, fmt.Errorf("line %d: %w: record has no \"record\" field", n, ErrFormat)
		}
		switch *peek.Record {
		case recordHeader:
			if err := r.header(line, peek.SchemaVersion); err != nil {
				return importRecord{}, fmt.Errorf("line %d: %w", n, err)
			}
		case recordVersion:
			if !r.hasHeader {
				return importRecord{}, fmt.Errorf("line %d: %w: version record before the header", n, ErrFormat)
			}
			rec := jsonlVersion{Version: &Version{}}
			if err := decodeStrict(line, &rec); err != nil {
				if errors.Is(err, ErrInvalidChunk) || errors.Is(err, ErrTooLarge) {
					return importRecord{}, fmt.Errorf("line %d: version: %w", n, err)
				}
				return importRecord{}, fmt.Errorf("line %d: %w: version: %w", n, ErrFormat, err)
			}
			if rec.ID == (ID{}) {
				return importRecord{}, fmt.Errorf("line %d: %w: version has no id", n, ErrFormat)
			}
			r.versions++
			return importRecord{line: n, size: len(line), v: rec.Version}, nil
		default:
			return importRecord{}, fmt.Errorf("line %d: %w: unknown record type %q", n, ErrFormat, *peek.Record)
		}
	}
}

// versionPrefix starts every version line Export writes.
var versionPrefix = []byte(`{"record":"version",`)

// fastVersion decodes a version line in one pass when it is one in every
// respect the full path checks (after the header, starting as Export
// writes it, one JSON object with no unknown field and nothing after it,
// an id); otherwise it returns nil and the full path (which parses the
// line twice) reads it and names its problem.
func (r *importReader) fastVersion(line []byte) *Version {
	if !r.hasHeader || !bytes.HasPrefix(line, versionPrefix) {
		return nil
	}
	rec := jsonlVersion{Version: &Version{}}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil || rec.Record != recordVersion || rec.ID == (ID{}) ||
		len(bytes.TrimSpace(line[dec.InputOffset():])) != 0 {
		return nil
	}
	return rec.Version
}

// header reads the header record.
func (r *importReader) header(line []byte, schema *int) error {
	if r.hasHeader {
		return fmt.Errorf("%w: second header record", ErrFormat)
	}
	if r.versions > 0 {
		return fmt.Errorf("%w: header after version records", ErrFormat)
	}
	switch {
	case schema == nil:
		return fmt.Errorf("%w: header has no schema_version", ErrFormat)
	case *schema > JSONLSchemaVersion:
		return fmt.Errorf("%w: schema_version %d is newer than this reader's %d", ErrFormat, *schema, JSONLSchemaVersion)
	case *schema < 1:
		return fmt.Errorf("%w: unsupported schema_version %d", ErrFormat, *schema)
	}
	var h jsonlHeader
	if err := decodeStrict(line, &h); err != nil {
		return fmt.Errorf("%w: header: %w", ErrFormat, err)
	}
	if h.Head == (ID{}) {
		return fmt.Errorf("%w: header has no head version id", ErrFormat)
	}
	r.head, r.hasHeader = h.Head, true
	return nil
}

// importSink writes checked versions.
type importSink interface {
	// wait waits for the writes in flight and returns their error.
	wait() error
	// lookup returns the stored versions among ids (header fields at
	// least) and, of keys, the id of the stored version holding each key
	// when the sink can tell.
	lookup(ctx context.Context, ids []ID, keys []string) (map[ID]*Version, map[string]ID, error)
	// put writes recs' versions, none of them stored yet, in order.
	put(ctx context.Context, recs []importRecord) error
}

// bulkSink writes through a [BulkTx]: one transaction for the import. A
// batch is written while the next one is read and checked (put returns
// once the write has started; lookup, put and wait wait for it), so the
// client's work and the database's overlap. Not safe for concurrent use.
type bulkSink struct {
	tx   BulkTx
	done chan error // the write in flight; nil when none
}

func (s *bulkSink) wait() error {
	if s.done == nil {
		return nil
	}
	err := <-s.done
	s.done = nil
	return err
}

func (s *bulkSink) lookup(ctx context.Context, ids []ID, keys []string) (map[ID]*Version, map[string]ID, error) {
	if err := s.wait(); err != nil {
		return nil, nil, err
	}
	vs, err := s.tx.Lookup(ctx, ids, keys)
	if err != nil {
		return nil, nil, err
	}
	byID := make(map[ID]*Version, len(vs))
	byKey := make(map[string]ID)
	for _, v := range vs {
		byID[v.ID] = v
		if v.Key != "" {
			byKey[v.Key] = v.ID
		}
	}
	return byID, byKey, nil
}

func (s *bulkSink) put(ctx context.Context, recs []importRecord) error {
	if err := s.wait(); err != nil {
		return err
	}
	vs := make([]*Version, len(recs))
	for i, rec := range recs {
		vs[i] = rec.v
	}
	first, last := recs[0].line, recs[len(recs)-1].line
	done := make(chan error, 1)
	s.done = done
	go func() {
		err := s.tx.PutBatch(ctx, vs)
		if err != nil {
			err = fmt.Errorf("lines %d-%d: %w", first, last, err)
		}
		done <- err
	}()
	return nil
}

// graphSink writes through a plain [Graph], one Put per version. It sees no
// keys: Put reports a key already taken.
type graphSink struct{ g Graph }

func (graphSink) wait() error { return nil }

func (s graphSink) lookup(ctx context.Context, ids []ID, _ []string) (map[ID]*Version, map[string]ID, error) {
	out := make(map[ID]*Version)
	for _, id := range ids {
		if _, ok := out[id]; ok {
			continue
		}
		v, err := s.g.Get(ctx, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("load %s: %w", id, err)
		}
		out[id] = v
	}
	return out, nil, nil
}

func (s graphSink) put(ctx context.Context, recs []importRecord) error {
	for _, rec := range recs {
		v := rec.v
		p, err := s.g.Put(ctx, v)
		if err != nil {
			return fmt.Errorf("line %d: version %s: %w", rec.line, v.ID, err)
		}
		if p.ID != v.ID || p.Hash != v.Hash {
			return fmt.Errorf("line %d: version %s: %w: key %q already commits version %s", rec.line, v.ID, ErrConflict, v.Key, p.ID)
		}
	}
	return nil
}

// fileVersion is what an import keeps of each version of the file once its
// body is written: enough to verify its children and to explain an
// ordering error.
type fileVersion struct {
	line int
	len  int
	hash string
	deps []ID
}

// missingLink is a version whose parent or base was neither earlier in the
// file nor stored when it was checked. Whether the parent comes later in
// the file (an ordering error, or a cycle) or nowhere is known only at the
// end of the file.
type missingLink struct {
	line  int
	child ID
	dep   ID
}

type importer struct {
	r    importReader
	sink importSink
	// maxVersions and maxBytes bound a batch; 0: the whole file is one
	// batch, written after every line was read and checked.
	maxVersions, maxBytes int

	seen map[ID]*fileVersion // every version of the file read so far
	keys map[string]ID       // the file's keys, to the version holding each
	// stored maps a link to a stored version from outside the file to the
	// first version that used it, so the same id appearing later in the
	// file is an ordering error whatever the batch boundaries.
	stored map[ID]missingLink

	batch      []importRecord
	batchBytes int
	head       *Version

	// failed is the first error found checking links, hashes and
	// conflicts. Nothing more is written after it; the rest of the file is
	// still read, so a format error anywhere in the file is reported first,
	// as when the whole file is checked before the first write.
	failed  error
	missing *missingLink // set when failed is a missing link
}

func newImporter(r io.Reader, sink importSink, maxVersions, maxBytes int) *importer {
	return &importer{
		r:    importReader{lr: jsonl.NewReader(r, MaxJSONLLineBytes)},
		sink: sink, maxVersions: maxVersions, maxBytes: maxBytes,
		seen: make(map[ID]*fileVersion), keys: make(map[string]ID), stored: make(map[ID]missingLink),
	}
}

// run imports the file and returns its head version.
func (im *importer) run(ctx context.Context) (*Version, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rec, err := im.r.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if err := im.add(rec); err != nil {
			return nil, err
		}
		if im.failed != nil {
			continue
		}
		im.batch = append(im.batch, rec)
		im.batchBytes += rec.size
		if im.maxVersions > 0 && (len(im.batch) >= im.maxVersions || im.batchBytes >= im.maxBytes) {
			if err := im.flush(ctx); err != nil {
				return nil, err
			}
		}
	}
	if _, ok := im.seen[im.r.head]; !ok {
		return nil, fmt.Errorf("%w: head version %s is not in the input (truncated file?)", ErrFormat, im.r.head)
	}
	if im.failed == nil {
		if err := im.flush(ctx); err != nil {
			return nil, err
		}
	}
	if im.failed != nil {
		return nil, im.explain()
	}
	if err := im.sink.wait(); err != nil {
		return nil, err
	}
	return im.head, nil
}

// add records a version of the file as it is read.
func (im *importer) add(rec importRecord) error {
	v := rec.v
	if prev, dup := im.seen[v.ID]; dup {
		return fmt.Errorf("line %d: %w: version %s already appeared on line %d", rec.line, ErrFormat, v.ID, prev.line)
	}
	im.seen[v.ID] = &fileVersion{line: rec.line, len: v.Len, hash: v.Hash, deps: deps(v)}
	if m, ok := im.stored[v.ID]; ok {
		im.fail(&m, nil)
	}
	return nil
}

// stopped reports whether a check failed: nothing more is written.
func (im *importer) stopped() bool { return im.failed != nil }

func (im *importer) fail(m *missingLink, err error) {
	if im.failed != nil {
		return
	}
	if m != nil {
		im.missing, im.failed = m, ErrFormat
		return
	}
	im.failed = err
}

// explain returns the import's error once the whole file was read.
func (im *importer) explain() error {
	m := im.missing
	if m == nil {
		return im.failed
	}
	e, ok := im.seen[m.dep]
	switch {
	case !ok:
		return fmt.Errorf("line %d: version %s: parent %s is neither in the input nor in the graph: %w", m.line, m.child, m.dep, ErrNotFound)
	case im.reaches(m.dep, m.child):
		return fmt.Errorf("line %d: version %s: %w: parent %s (line %d) descends from it", m.line, m.child, ErrCycle, m.dep, e.line)
	default:
		return fmt.Errorf("line %d: version %s: %w: parent %s comes later, on line %d (versions must be in topological order)", m.line, m.child, ErrFormat, m.dep, e.line)
	}
}

// reaches reports whether to is from, or one of from's ancestors in the
// file.
func (im *importer) reaches(from, to ID) bool {
	visited := map[ID]bool{from: true}
	stack := []ID{from}
	for len(stack) > 0 {
		cur := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if cur == to {
			return true
		}
		if e, ok := im.seen[cur]; ok {
			for _, d := range e.deps {
				if !visited[d] {
					visited[d] = true
					stack = append(stack, d)
				}
			}
		}
	}
	return false
}

// flush checks the batch and writes what is not stored yet. A check that
// fails is recorded in im.failed (nothing more is written); an error of
// the sink is returned.
func (im *importer) flush(ctx context.Context) error {
	batch := im.batch
	im.batch, im.batchBytes = nil, 0
	if len(batch) == 0 || im.stopped() {
		return nil
	}
	var ids []ID
	var keys []string
	for _, rec := range batch {
		ids = append(ids, rec.v.ID)
		for _, d := range im.seen[rec.v.ID].deps {
			if e, ok := im.seen[d]; !ok || e.line >= rec.line {
				ids = append(ids, d)
			}
		}
		if rec.v.Key != "" {
			keys = append(keys, rec.v.Key)
		}
	}
	stored, storedKeys, err := im.sink.lookup(ctx, ids, keys)
	if err != nil {
		return fmt.Errorf("lines %d-%d: %w", batch[0].line, batch[len(batch)-1].line, err)
	}
	put := make([]importRecord, 0, len(batch))
	for _, rec := range batch {
		write, err := im.check(rec, stored, storedKeys)
		if err != nil || im.failed != nil {
			im.fail(nil, err)
			break
		}
		if write {
			put = append(put, rec)
		}
		if rec.v.ID == im.r.head {
			im.head = rec.v
		}
	}
	if len(put) == 0 || im.stopped() {
		return nil
	}
	return im.sink.put(ctx, put)
}

// check verifies one version against its parents and base and says
// whether it must be written (false: the same version is stored). A
// missing link is recorded with fail and returns no error.
func (im *importer) check(rec importRecord, stored map[ID]*Version, storedKeys map[string]ID) (bool, error) {
	v := rec.v
	linked := make(map[ID]*Version, len(v.Parents)+1)
	for _, d := range im.seen[v.ID].deps {
		if e, ok := im.seen[d]; ok && e.line < rec.line {
			linked[d] = &Version{ID: d, Hash: e.hash, Len: e.len}
			continue
		}
		if s, ok := stored[d]; ok && im.seen[d] == nil {
			linked[d] = s
			if _, seen := im.stored[d]; !seen {
				im.stored[d] = missingLink{line: rec.line, child: v.ID, dep: d}
			}
			continue
		}
		im.fail(&missingLink{line: rec.line, child: v.ID, dep: d}, nil)
		return false, nil
	}
	parents := make([]*Version, len(v.Parents))
	for k, p := range v.Parents {
		parents[k] = linked[p]
	}
	var base *Version
	if v.Base != nil {
		base = linked[*v.Base]
	}
	have := stored[v.ID]
	if err := VerifyLinks(v, parents, base); err != nil {
		// A different version already stored under this id is the
		// conflict a write would report; say that rather than the hash.
		if have != nil && have.Hash != v.Hash {
			return false, fmt.Errorf("line %d: version %s: %w: the graph holds another version with this id (hash %s)", rec.line, v.ID, ErrConflict, have.Hash)
		}
		return false, fmt.Errorf("line %d: version %s: %w", rec.line, v.ID, err)
	}
	if err := checkImported(v); err != nil {
		return false, fmt.Errorf("line %d: version %s: %w", rec.line, v.ID, err)
	}
	if have != nil {
		if have.Hash != v.Hash {
			return false, fmt.Errorf("line %d: version %s: %w: the graph holds another version with this id (hash %s)", rec.line, v.ID, ErrConflict, have.Hash)
		}
		return false, nil
	}
	if v.Key != "" {
		holder, ok := storedKeys[v.Key]
		if !ok {
			holder, ok = im.keys[v.Key]
		}
		if ok && holder != v.ID {
			return false, fmt.Errorf("line %d: version %s: %w: key %q already commits version %s", rec.line, v.ID, ErrConflict, v.Key, holder)
		}
		im.keys[v.Key] = v.ID
	}
	return true, nil
}
