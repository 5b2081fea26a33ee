package mcp

import (
	"strings"
	"sync"
)

// tailBuffer keeps the last n bytes written to it. It is safe for
// concurrent use.
type tailBuffer struct {
	mu  sync.Mutex // guards following
	buf []byte
	n   int
}

func newTailBuffer(n int) *tailBuffer { return &tailBuffer{n: n} }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.n; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// String returns the kept bytes as one line of valid UTF-8, trimmed.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	// A rune cut in half by the window is dropped.
	s := strings.ToValidUTF8(string(t.buf), "")
	return strings.Join(strings.Fields(s), " ")
}
