// Package graphrow holds what the Postgres and SQLite stores share: the
// encoding of version fields into columns, the in-process cache of immutable
// versions and transcripts, link checks for bulk puts and the integrity
// checker behind Store.Verify.
package graphrow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/rath-run/rath/pkg/session"
)

// Header is what link checks need of a stored version.
type Header struct {
	ID   session.ID
	Hash string
	Len  int
}

// Stub returns a Version carrying only the header fields, for
// [session.VerifyLinks].
func (h Header) Stub() *session.Version { return &session.Version{ID: h.ID, Hash: h.Hash, Len: h.Len} }

// LinkIDs returns v's parents and base, deduplicated.
func LinkIDs(v *session.Version) []session.ID {
	ids := make([]session.ID, 0, len(v.Parents)+1)
	seen := make(map[session.ID]bool, len(v.Parents)+1)
	for _, p := range v.Parents {
		if !seen[p] {
			seen[p] = true
			ids = append(ids, p)
		}
	}
	if v.Base != nil && !seen[*v.Base] {
		ids = append(ids, *v.Base)
	}
	return ids
}

// VerifyAgainst checks v with [session.VerifyLinks] against headers, which
// must hold v's parents and base when they are stored.
func VerifyAgainst(v *session.Version, headers map[session.ID]Header) error {
	parents := make([]*session.Version, len(v.Parents))
	for i, p := range v.Parents {
		h, ok := headers[p]
		if !ok {
			return fmt.Errorf("%w: parent %s of %s", session.ErrNotFound, p, v.ID)
		}
		parents[i] = h.Stub()
	}
	var base *session.Version
	if v.Base != nil {
		h, ok := headers[*v.Base]
		if !ok {
			return fmt.Errorf("%w: base %s of %s", session.ErrNotFound, *v.Base, v.ID)
		}
		base = h.Stub()
	}
	return session.VerifyLinks(v, parents, base)
}

// Placement encodes a placement column.
func Placement(p session.Placement) (string, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("%w: placement: %w", session.ErrInvalidVersion, err)
	}
	return string(b), nil
}

// ParsePlacement decodes a placement column.
func ParsePlacement(s string) (session.Placement, error) {
	var p session.Placement
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		return p, fmt.Errorf("%w: stored placement: %w", session.ErrHashMismatch, err)
	}
	return p, nil
}

// Extras encodes an extras column exactly as the hash sees it (nil and empty
// stay distinct: "null" and "[]").
func Extras(e []session.Extra) (string, error) {
	b, err := session.AppendExtrasJSON(nil, e)
	if err == nil && bytes.ContainsAny(b, "<>&") {
		// The column has always held json.Marshal's form, which escapes
		// these; keep it so.
		b, err = json.Marshal(e)
	}
	if err != nil {
		return "", fmt.Errorf("%w: extras: %w", session.ErrInvalidVersion, err)
	}
	return string(b), nil
}

// ParseExtras decodes an extras column.
func ParseExtras(s string) ([]session.Extra, error) {
	if s == "null" || s == "" {
		return nil, nil
	}
	e := []session.Extra{}
	if err := json.Unmarshal([]byte(s), &e); err != nil {
		return nil, fmt.Errorf("%w: stored extras: %w", session.ErrHashMismatch, err)
	}
	return e, nil
}

// NullString maps "" to SQL NULL: it is s, or nil when *s is empty (a
// pointer into the caller's value, not a copy of the string).
func NullString(s *string) *string {
	if *s == "" {
		return nil
	}
	return s
}

// FromNull maps SQL NULL to "".
func FromNull(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Cache keeps versions and transcripts in process. Versions never change
// except through a redaction, which replaces a chunk's content and keeps its
// hash, so a cached entry is correct for as long as no redaction happened
// since it was read (docs/architecture.md §3 invariant 5); the bounds only limit memory.
// Safe for concurrent use.
//
// # Redaction epochs
//
// The database keeps a redaction epoch, a counter every redaction bumps in
// its own transaction (migration 00018, table redaction_epoch). The contract
// that makes a redaction take effect in every process at once:
//
//   - Before serving content from the cache, a store reads the epoch from
//     the database and calls [Cache.Sync], which drops every entry when the
//     epoch differs from the one the cache holds. A read that starts after
//     the redaction committed sees the new epoch, so it is served from the
//     database, never from an entry read before the redaction.
//   - Every entry is added with the epoch the cache held before its content
//     was read from (or written to) the database ([Cache.Epoch]); an add
//     whose epoch is no longer the cache's is dropped. So a load that raced
//     a redaction and a purge cannot put the old content back.
//
// Header fields (id, hash, len, links) are never changed by a redaction;
// link checks read them from the cache without a Sync.
type Cache struct {
	versions    *sizedLRU[*session.Version]
	transcripts *sizedLRU[[]session.Chunk]

	mu    sync.RWMutex // guards following; held for reading by adds, for writing by Sync and Purge
	epoch int64        // the database's redaction epoch, as last synced
	known bool         // epoch was read from the database (Sync) since the last purge
	gen   uint64       // bumped by every purge; adds carry the gen they started at
}

// Default cache sizes, in entries.
const (
	DefaultCachedVersions    = 4096
	DefaultCachedTranscripts = 256
)

// NewCache returns a cache holding up to nVersions versions and
// nTranscripts transcripts, and at most DefaultCachedVersionBytes and
// DefaultCachedTranscriptBytes of them; 0 picks the default counts, a
// negative count disables that cache.
func NewCache(nVersions, nTranscripts int) *Cache {
	return newCache(nVersions, nTranscripts, DefaultCachedVersionBytes, DefaultCachedTranscriptBytes)
}

func newCache(nVersions, nTranscripts int, versionBytes, transcriptBytes int64) *Cache {
	c := &Cache{}
	if nVersions == 0 {
		nVersions = DefaultCachedVersions
	}
	if nTranscripts == 0 {
		nTranscripts = DefaultCachedTranscripts
	}
	if nVersions > 0 {
		c.versions = newSizedLRU(nVersions, versionBytes, versionBytesOf)
	}
	if nTranscripts > 0 {
		c.transcripts = newSizedLRU(nTranscripts, transcriptBytes, chunksBytes)
	}
	return c
}

// Epoch is a token of the cache's current redaction epoch: take it before
// reading or writing the content that is then added with it.
type Epoch struct{ gen uint64 }

// Epoch returns the cache's current epoch token.
func (c *Cache) Epoch() Epoch {
	if c == nil {
		return Epoch{}
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return Epoch{gen: c.gen}
}

// Sync records the database's redaction epoch, read just now: when it is
// not the one the cache holds, every entry is dropped first. Call it before
// serving content from the cache.
func (c *Cache) Sync(dbEpoch int64) {
	if c == nil {
		return
	}
	c.mu.RLock()
	same := c.known && c.epoch == dbEpoch
	c.mu.RUnlock()
	if same {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.known && c.epoch == dbEpoch {
		return
	}
	c.purgeLocked()
	c.epoch, c.known = dbEpoch, true
}

// Version returns a cached version. Its chunks are current only after a
// Sync; its header fields always are.
func (c *Cache) Version(id session.ID) (*session.Version, bool) {
	if c == nil || c.versions == nil {
		return nil, false
	}
	return c.versions.Get(id)
}

// AddVersion caches v, read or written at epoch e (see [Cache.Epoch]).
func (c *Cache) AddVersion(v *session.Version, e Epoch) {
	if c == nil || c.versions == nil {
		return
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if e.gen == c.gen {
		c.versions.Add(v.ID, v)
	}
}

// Transcript returns a cached transcript, or builds it from a cached
// version and its base's cached transcript.
func (c *Cache) Transcript(id session.ID) ([]session.Chunk, bool) {
	if c == nil || c.transcripts == nil {
		return nil, false
	}
	// Hold the epoch for reading: the parts and the composed transcript
	// belong to one epoch.
	c.mu.RLock()
	defer c.mu.RUnlock()
	if t, ok := c.transcripts.Get(id); ok {
		return t, true
	}
	v, ok := c.Version(id)
	if !ok {
		return nil, false
	}
	var prefix []session.Chunk
	if v.Base != nil {
		if prefix, ok = c.transcripts.Get(*v.Base); !ok {
			return nil, false
		}
	}
	t := make([]session.Chunk, 0, v.Len)
	t = append(append(t, prefix...), v.Chunks...)
	if len(t) != v.Len {
		return nil, false
	}
	c.transcripts.Add(id, t)
	return t, true
}

// AddTranscript caches a transcript read at epoch e (see [Cache.Epoch]).
func (c *Cache) AddTranscript(id session.ID, t []session.Chunk, e Epoch) {
	if c == nil || c.transcripts == nil {
		return
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if e.gen == c.gen {
		c.transcripts.Add(id, t)
	}
}
