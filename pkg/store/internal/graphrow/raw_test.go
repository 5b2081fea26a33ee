package graphrow

import (
	"bytes"
	"testing"
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
