// Package capbuf is an io.Writer keeping at most a fixed number of bytes and
// remembering whether it dropped any, for capping a command's output.
package capbuf

import "sync"

// Buffer keeps the first Max bytes written and discards the rest, always
// reporting a full write so the writer never blocks or fails. Safe for
// concurrent use.
type Buffer struct {
	mu        sync.Mutex
	max       int
	buf       []byte
	truncated bool
}

// New returns a buffer keeping at most max bytes (max <= 0 keeps nothing).
func New(max int) *Buffer { return &Buffer{max: max} }

// Write keeps what fits.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	room := b.max - len(b.buf)
	if room >= len(p) {
		b.buf = append(b.buf, p...)
		return len(p), nil
	}
	if room > 0 {
		b.buf = append(b.buf, p[:room]...)
	}
	b.truncated = true
	return len(p), nil
}

// Bytes returns what was kept (never nil) and whether anything was dropped.
func (b *Buffer) Bytes() ([]byte, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]byte, len(b.buf))
	copy(out, b.buf)
	return out, b.truncated
}
