// Package graphrow holds what the Postgres and SQLite stores share: the
// encoding of version fields into columns, the in-process cache of immutable
// versions and transcripts, link checks for bulk puts and the integrity
// checker behind Store.Verify.
package graphrow

import (
	"encoding/json"
	"fmt"

	lru "github.com/hashicorp/golang-lru/v2"

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
	b, err := json.Marshal(e)
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

// NullString maps "" to SQL NULL.
func NullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// FromNull maps SQL NULL to "".
func FromNull(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Cache keeps immutable versions and transcripts in process. Because
// versions never change, a cached entry is always correct (DESIGN §3
// invariant 5); the bounds only limit memory. Safe for concurrent use.
type Cache struct {
	versions    *lru.Cache[session.ID, *session.Version]
	transcripts *lru.Cache[session.ID, []session.Chunk]
}

// Default cache sizes, in entries.
const (
	DefaultCachedVersions    = 4096
	DefaultCachedTranscripts = 256
)

// NewCache returns a cache holding up to nVersions versions and
// nTranscripts transcripts; 0 picks the defaults, a negative size disables
// that cache.
func NewCache(nVersions, nTranscripts int) *Cache {
	c := &Cache{}
	if nVersions == 0 {
		nVersions = DefaultCachedVersions
	}
	if nTranscripts == 0 {
		nTranscripts = DefaultCachedTranscripts
	}
	if nVersions > 0 {
		c.versions, _ = lru.New[session.ID, *session.Version](nVersions)
	}
	if nTranscripts > 0 {
		c.transcripts, _ = lru.New[session.ID, []session.Chunk](nTranscripts)
	}
	return c
}

// Version returns a cached version.
func (c *Cache) Version(id session.ID) (*session.Version, bool) {
	if c == nil || c.versions == nil {
		return nil, false
	}
	return c.versions.Get(id)
}

// AddVersion caches v.
func (c *Cache) AddVersion(v *session.Version) {
	if c != nil && c.versions != nil {
		c.versions.Add(v.ID, v)
	}
}

// Transcript returns a cached transcript, or builds it from a cached
// version and its base's cached transcript.
func (c *Cache) Transcript(id session.ID) ([]session.Chunk, bool) {
	if c == nil || c.transcripts == nil {
		return nil, false
	}
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

// AddTranscript caches a transcript.
func (c *Cache) AddTranscript(id session.ID, t []session.Chunk) {
	if c != nil && c.transcripts != nil {
		c.transcripts.Add(id, t)
	}
}
