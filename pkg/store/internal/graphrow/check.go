package graphrow

import (
	"bytes"
	"fmt"

	"github.com/rath-run/rath/pkg/session"
)

// StoredChunk is one chunk row as read back.
type StoredChunk struct {
	Ord     int
	Kind    string
	Payload []byte
	Hash    string
}

// Checker recomputes hashes from stored rows. Feed it versions in commit
// order (parents before children), each with its own chunk rows; it records
// what does not verify.
type Checker struct {
	seen     map[session.ID]Header
	Versions int
	Chunks   int
	Edges    int
	Problems []string
	limit    int
	lanes    map[session.ID]LanePos
}

// NewChecker returns a Checker keeping at most limit problems.
func NewChecker(limit int) *Checker {
	return &Checker{seen: make(map[session.ID]Header), limit: limit}
}

func (c *Checker) problem(format string, args ...any) {
	if len(c.Problems) < c.limit {
		c.Problems = append(c.Problems, fmt.Sprintf(format, args...))
	}
}

// Add checks one version: v holds its stored header fields (Chunks empty);
// rows are its chunk rows in ord order.
func (c *Checker) Add(v *session.Version, rows []StoredChunk) {
	c.Versions++
	c.Edges += len(v.Parents)
	start := v.Len - len(rows)
	chunks := make([]session.Chunk, 0, len(rows))
	for i, r := range rows {
		c.Chunks++
		if r.Ord != start+i {
			c.problem("version %s: chunk at ord %d, want %d", v.ID, r.Ord, start+i)
		}
		var ch session.Chunk
		var err error
		if session.IsRedactionMarker(r.Payload) {
			// A redacted chunk keeps its original hash in the marker; the
			// store's Verify checks a redactions row records it.
			ch, err = session.ParseRedacted(session.Kind(r.Kind), r.Payload)
		} else {
			ch, err = session.NewChunk(session.Kind(r.Kind), r.Payload)
		}
		if err != nil {
			c.problem("version %s: chunk %d: %v", v.ID, r.Ord, err)
			continue
		}
		if !bytes.Equal(ch.Payload(), r.Payload) {
			c.problem("version %s: chunk %d: payload is not canonical", v.ID, r.Ord)
		}
		if h := ch.Hash(); h != r.Hash {
			c.problem("version %s: chunk %d: stored hash %s, computed %s", v.ID, r.Ord, r.Hash, h)
		}
		chunks = append(chunks, ch)
	}
	full := *v
	full.Chunks = chunks
	if err := VerifyAgainst(&full, c.seen); err != nil {
		c.problem("version %s: %v", v.ID, err)
	}
	c.seen[v.ID] = Header{ID: v.ID, Hash: v.Hash, Len: v.Len}
}

// Err returns nil when nothing failed, else an error wrapping
// [session.ErrHashMismatch].
func (c *Checker) Err() error {
	if len(c.Problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d problem(s) in the stored graph, first: %s", session.ErrHashMismatch, len(c.Problems), c.Problems[0])
}

// CheckBatch verifies vs in order for a bulk put: stored holds the headers
// of stored versions they link to; each version may also link to one
// earlier in vs. Ids and keys must be unique within vs.
func CheckBatch(vs []*session.Version, stored map[session.ID]Header) error {
	headers := make(map[session.ID]Header, len(stored)+len(vs))
	for id, h := range stored {
		headers[id] = h
	}
	keys := make(map[string]bool)
	for i, v := range vs {
		if v == nil {
			return fmt.Errorf("%w: versions[%d] is nil", session.ErrInvalidVersion, i)
		}
		if _, dup := headers[v.ID]; dup {
			return fmt.Errorf("%w: versions[%d]: id %s is already stored or repeated", session.ErrConflict, i, v.ID)
		}
		if v.Key != "" {
			if keys[v.Key] {
				return fmt.Errorf("%w: versions[%d]: key %q repeated", session.ErrConflict, i, v.Key)
			}
			keys[v.Key] = true
		}
		if err := VerifyAgainst(v, headers); err != nil {
			return fmt.Errorf("versions[%d]: %w", i, err)
		}
		headers[v.ID] = Header{ID: v.ID, Hash: v.Hash, Len: v.Len}
	}
	return nil
}

// External returns the ids vs links to that are not in vs.
func External(vs []*session.Version) []session.ID {
	in := make(map[session.ID]bool, len(vs))
	for _, v := range vs {
		if v != nil {
			in[v.ID] = true
		}
	}
	var out []session.ID
	seen := make(map[session.ID]bool)
	for _, v := range vs {
		if v == nil {
			continue
		}
		for _, id := range LinkIDs(v) {
			if !in[id] && !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		}
	}
	return out
}
