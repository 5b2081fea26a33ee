package graphrow

import (
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/rath-run/rath/pkg/session"
)

// Byte bounds of the caches, on top of their entry counts: a count alone
// lets 256 transcripts of long sessions hold gigabytes. A value larger
// than its cache's bound is not cached.
const (
	DefaultCachedVersionBytes    = 16 << 20
	DefaultCachedTranscriptBytes = 32 << 20
)

// chunkOverhead approximates a cached chunk's memory besides its payload:
// the Chunk value in its slice and the payload's allocation rounding.
const chunkOverhead = 48

func chunksBytes(cs []session.Chunk) int64 {
	n := int64(len(cs)) * chunkOverhead
	for _, c := range cs {
		n += int64(c.Size())
	}
	return n
}

func versionBytesOf(v *session.Version) int64 { return 512 + chunksBytes(v.Chunks) }

// sizedLRU is an LRU cache bounded by entries and by the bytes its values
// hold (as size reports them). Composed transcripts share payloads with
// the versions and transcripts they were built from, so the sum
// overstates the memory: the bound errs on the safe side.
type sizedLRU[V any] struct {
	c    *lru.Cache[session.ID, V]
	size func(V) int64
	max  int64

	mu   sync.Mutex // serializes Add, so used stays exact
	used int64      // guarded by the lru's eviction callback and mu
}

func newSizedLRU[V any](entries int, maxBytes int64, size func(V) int64) *sizedLRU[V] {
	s := &sizedLRU[V]{size: size, max: maxBytes}
	// The callback runs on the goroutine of the Add, Remove, RemoveOldest
	// or Purge that evicted, all of which hold mu.
	s.c, _ = lru.NewWithEvict(entries, func(_ session.ID, v V) { s.used -= size(v) })
	return s
}

func (s *sizedLRU[V]) Get(id session.ID) (V, bool) { return s.c.Get(id) }

// Add caches v under id, evicting the least recently used entries until
// the bytes are within the bound.
func (s *sizedLRU[V]) Add(id session.ID, v V) {
	n := s.size(v)
	if n > s.max {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Replacing a value does not call the eviction callback: remove the
	// old one first so its bytes are subtracted.
	s.c.Remove(id)
	s.c.Add(id, v)
	s.used += n
	for s.used > s.max {
		if _, _, ok := s.c.RemoveOldest(); !ok {
			break
		}
	}
}

func (s *sizedLRU[V]) Purge() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.c.Purge()
}

// bytes reports the bytes accounted to the cached values.
func (s *sizedLRU[V]) bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}
