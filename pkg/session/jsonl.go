package session

// Rath session JSONL: a self-contained, schema-versioned export of one
// version and its whole ancestry.
//
// # Format (schema_version 1)
//
// The file is UTF-8 JSON Lines: one JSON object per line, each line ending
// in "\n". The first record is the header:
//
//	{"record":"rath.session","schema_version":1,"head":"<version id>"}
//
// head names the version the file was exported for. Every following record
// is one version:
//
//	{"record":"version","id":…,"parents":[…],"base":…,"op":…,"chunks":[{"kind":…,"payload":{…}}],
//	 "len":…,"placement":{…},"usage":{…},"producer":{…},"extras":[[k,v]],"key":…,
//	 "created_at":…,"hash":…}
//
// The version fields are exactly [Version]'s JSON form ("base", "placement",
// "producer", "extras" and "key" are omitted when empty; "parents" and
// "chunks" are always arrays). A version record carries only the chunks that
// version appends to its base, never its base's chunks, so a long session
// costs O(total chunks), not O(versions × length).
//
// The file holds every version reachable from head through Parents and Base,
// in topological order (every version after all of its parents and its
// base). Among versions whose dependencies are already written, the one with
// the earliest CreatedAt comes first, then the smaller id, so an export is a
// deterministic function of the graph: exporting, importing into another
// graph and exporting again gives the same bytes.
//
// Each line is at most [MaxJSONLLineBytes] bytes. Export refuses to write a
// longer line ([ErrTooLarge]), so everything Export writes, Import reads.
//
// # Import
//
// [Import] reads a file, checks it, and puts each version into a [Graph] in
// file order, all or nothing: into a [BulkGraph] (the stores) in one
// transaction, streamed in batches; into any other graph after the whole
// file has been checked. Every hash is verified ([ErrHashMismatch] when a
// byte of a version was changed); versions already stored with the same hash
// are accepted, so importing a file twice is a no-op. A parent or base that is
// not in the file must already be in the graph. Errors name the line and the
// problem, and wrap the sentinel errors of this package: [ErrFormat] for a
// file that is not session JSONL (bad JSON, invalid UTF-8, unknown or
// misplaced records, an unsupported schema_version, a missing head),
// [ErrTooLarge] for an overlong line, [ErrInvalidChunk] for an unknown chunk
// kind or a malformed payload, [ErrCycle], [ErrNotFound] for an absent
// parent, [ErrConflict] for an id or key already holding something else.

import (
	"bufio"
	"bytes"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
)

// ErrFormat means the input is not well-formed session JSONL.
var ErrFormat = errors.New("rath: malformed session JSONL")

// JSONLSchemaVersion is the schema_version [Export] writes and the newest
// one [Import] reads.
const JSONLSchemaVersion = 1

// MaxJSONLLineBytes bounds one line of session JSONL (twice
// [MaxChunkBytes]).
const MaxJSONLLineBytes = 2 * MaxChunkBytes

const (
	recordHeader  = "rath.session"
	recordVersion = "version"
)

type jsonlHeader struct {
	Record        string `json:"record"`
	SchemaVersion int    `json:"schema_version"`
	Head          ID     `json:"head"`
}

type jsonlVersion struct {
	Record string `json:"record"`
	*Version
}

// Export writes the version id and every version it descends from (through
// Parents and Base) to w as session JSONL; see the format above.
func Export(ctx context.Context, g Graph, id ID, w io.Writer) error {
	versions, err := ancestry(ctx, g, id)
	if err != nil {
		return err
	}
	order, err := topoOrder(versions)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	if err := writeJSONLine(bw, jsonlHeader{Record: recordHeader, SchemaVersion: JSONLSchemaVersion, Head: id}); err != nil {
		return fmt.Errorf("export %s: header: %w", id, err)
	}
	for _, v := range order {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := exportable(v); err != nil {
			return fmt.Errorf("export %s: %w", id, err)
		}
		c := *v
		if c.Parents == nil {
			c.Parents = []ID{}
		}
		if c.Chunks == nil {
			c.Chunks = []Chunk{}
		}
		if err := writeJSONLine(bw, jsonlVersion{Record: recordVersion, Version: &c}); err != nil {
			return fmt.Errorf("export %s: version %s: %w", id, v.ID, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("export %s: %w", id, err)
	}
	return nil
}

// exportable refuses versions whose JSON form would not import to the same
// hash: an extra whose value is not canonical JSON is hashed as given but
// canonicalised when decoded. Seal canonicalises extras and Validate refuses
// them, so only a graph that skips validation can hold one.
func exportable(v *Version) error {
	for _, e := range v.Extras {
		if len(e.Value) == 0 {
			continue
		}
		c, err := canonicalJSON(e.Value)
		if err != nil || !bytes.Equal(c, e.Value) {
			return fmt.Errorf("%w: version %s: extra %q value %s is not canonical JSON (sorted keys, no spaces), so it would not import with the same hash", ErrInvalidVersion, v.ID, e.Key, e.Value)
		}
	}
	return nil
}

func writeJSONLine(w *bufio.Writer, v any) error {
	b, err := marshalCanonical(v)
	if err != nil {
		return err
	}
	if len(b) > MaxJSONLLineBytes {
		return fmt.Errorf("%w: record is %d bytes, line limit %d", ErrTooLarge, len(b), MaxJSONLLineBytes)
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}

// ancestry loads id and everything reachable from it through Parents and
// Base.
func ancestry(ctx context.Context, g Graph, id ID) (map[ID]*Version, error) {
	out := make(map[ID]*Version)
	stack := []ID{id}
	for len(stack) > 0 {
		cur := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if _, ok := out[cur]; ok {
			continue
		}
		v, err := g.Get(ctx, cur)
		if err != nil {
			if cur == id {
				return nil, fmt.Errorf("export %s: %w", id, err)
			}
			return nil, fmt.Errorf("export %s: load ancestor %s: %w", id, cur, err)
		}
		out[cur] = v
		for _, d := range deps(v) {
			if _, ok := out[d]; !ok {
				stack = append(stack, d)
			}
		}
	}
	return out, nil
}

// deps returns v's parents and base, without duplicates.
func deps(v *Version) []ID {
	out := make([]ID, 0, len(v.Parents)+1)
	out = append(out, v.Parents...)
	if v.Base != nil {
		dup := false
		for _, p := range v.Parents {
			if p == *v.Base {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, *v.Base)
		}
	}
	return out
}

// versionHeap orders ready versions by CreatedAt, then id.
type versionHeap []*Version

func (h versionHeap) Len() int { return len(h) }
func (h versionHeap) Less(i, j int) bool {
	if c := h[i].CreatedAt.Compare(h[j].CreatedAt); c != 0 {
		return c < 0
	}
	return bytes.Compare(h[i].ID[:], h[j].ID[:]) < 0 // the same order as the ids' text
}
func (h versionHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *versionHeap) Push(x any)   { *h = append(*h, x.(*Version)) }
func (h *versionHeap) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}

// topoOrder sorts a closed set of versions so every version follows its
// dependencies, breaking ties by CreatedAt then id.
func topoOrder(vs map[ID]*Version) ([]*Version, error) {
	pending := make(map[ID]int, len(vs))
	children := make(map[ID][]ID, len(vs))
	ready := &versionHeap{}
	for id, v := range vs {
		ds := deps(v)
		pending[id] = len(ds)
		for _, d := range ds {
			children[d] = append(children[d], id)
		}
		if len(ds) == 0 {
			*ready = append(*ready, v)
		}
	}
	heap.Init(ready)
	out := make([]*Version, 0, len(vs))
	for ready.Len() > 0 {
		v := heap.Pop(ready).(*Version)
		out = append(out, v)
		for _, c := range children[v.ID] {
			pending[c]--
			if pending[c] == 0 {
				heap.Push(ready, vs[c])
			}
		}
	}
	if len(out) != len(vs) {
		for id, n := range pending {
			if n > 0 {
				return nil, fmt.Errorf("%w: version %s is on a cycle of stored versions", ErrCycle, id)
			}
		}
	}
	return out, nil
}
