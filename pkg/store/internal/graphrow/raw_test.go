package graphrow

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/session"
)

// The arena's copies equal their sources and survive the source's reuse,
// and the blocks it allocates stay within about twice what it copied (plus
// the first block), so a small result does not pin a large block.
func TestArenaCopiesAndBoundsBlocks(t *testing.T) {
	for _, sizes := range [][]int{{60}, {1}, {0, 5}, {2000}, {100000}, {700, 700, 700, 700, 700, 700, 700}} {
		var a Arena
		var copies, want [][]byte
		allocated, copied := 0, 0
		src := make([]byte, 0, 1<<17)
		for i, n := range sizes {
			src = src[:n]
			for j := range src {
				src[j] = byte(i + j)
			}
			before := cap(a.block)
			c := a.Copy(src)
			if cap(a.block) != before || len(a.block) == len(c) {
				allocated += cap(a.block)
			}
			copied += n
			copies = append(copies, c)
			want = append(want, bytes.Clone(src))
		}
		for j := range src {
			src[j] = 0xff // the driver reuses its buffer
		}
		for i := range copies {
			if !bytes.Equal(copies[i], want[i]) {
				t.Fatalf("sizes %v: copy %d changed", sizes, i)
			}
		}
		if limit := 2*copied + arenaMinBlock; allocated > limit {
			t.Errorf("sizes %v: %d bytes of blocks for %d copied; want at most %d", sizes, allocated, copied, limit)
		}
	}
}

// The caches stay within their byte bounds whatever the entry counts
// allow, evicting the least recently used; a value over the bound is not
// cached; replacing a value accounts for the old one's bytes.
func TestCacheByteBound(t *testing.T) {
	const bound = 64 << 10
	c := newCache(1000, 1000, bound, bound)
	c.Sync(1)
	e := c.Epoch()
	chunk := func(n int) session.Chunk {
		return session.User(strings.Repeat("x", n))
	}
	var ids []session.ID
	for i := range 100 {
		id := session.NewID()
		ids = append(ids, id)
		c.AddTranscript(id, []session.Chunk{chunk(4000)}, e)
		if i == 0 {
			// Replaced by a smaller value, then by the same one.
			c.AddTranscript(id, []session.Chunk{chunk(10)}, e)
			c.AddTranscript(id, []session.Chunk{chunk(4000)}, e)
		}
		if used := c.transcripts.bytes(); used > bound {
			t.Fatalf("after %d adds: %d bytes cached, over the %d bound", i+1, used, bound)
		}
	}
	if _, ok := c.Transcript(ids[0]); ok {
		t.Error("the least recently used transcript survived 100 adds of 4 KB into 64 KiB")
	}
	if _, ok := c.Transcript(ids[99]); !ok {
		t.Error("the last transcript added is not cached")
	}
	big := session.NewID()
	c.AddTranscript(big, []session.Chunk{chunk(bound)}, e)
	if _, ok := c.Transcript(big); ok {
		t.Error("a transcript over the byte bound was cached")
	}
	c.Sync(2) // a new redaction epoch purges
	if used := c.transcripts.bytes(); used != 0 {
		t.Errorf("after a purge %d bytes are still accounted", used)
	}
}
