package worker

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestTokenBatcher: whatever the timer and the flushes do, the sent texts
// join to the deltas in order, sends never overlap, and nothing is sent
// after the last flush.
func TestTokenBatcher(t *testing.T) {
	var sent strings.Builder
	var sending, sends atomic.Int32
	var closed atomic.Bool
	b := newTokenBatcher(200*time.Microsecond, func(text string) {
		if sending.Add(1) != 1 {
			t.Error("two sends at once")
		}
		if closed.Load() {
			t.Error("a send after the last flush")
		}
		sent.WriteString(text)
		sends.Add(1)
		time.Sleep(50 * time.Microsecond)
		sending.Add(-1)
	})
	var want strings.Builder
	for i := range 2000 {
		d := string(rune('a' + i%26))
		want.WriteString(d)
		b.add(d)
		b.add("") // nothing to gather
		if i%97 == 0 {
			b.flush()
		}
		if i%13 == 0 {
			time.Sleep(100 * time.Microsecond)
		}
	}
	b.flush()
	closed.Store(true)
	time.Sleep(2 * time.Millisecond) // a stray timer would send now
	if sent.String() != want.String() {
		t.Fatalf("sent %d bytes, want the %d bytes of the deltas in order", sent.Len(), want.Len())
	}
	if n := sends.Load(); n < 2 || n >= 2000 {
		t.Fatalf("%d sends for 2000 deltas", n)
	}
}
