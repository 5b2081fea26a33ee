package worker

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestTokenBatcher: whatever the timers and the flushes do, the sent
// texts join to the deltas in order, sends never overlap, and a timer
// that fires after the last flush sends nothing. The test fires the
// timers itself, some while the step's goroutine adds and flushes.
func TestTokenBatcher(t *testing.T) {
	var sent strings.Builder
	var sending, sends atomic.Int32
	var closed atomic.Bool
	var mu sync.Mutex
	var timers []func()
	b := newTokenBatcher(time.Hour, func(text string) {
		if sending.Add(1) != 1 {
			t.Error("two sends at once")
		}
		if closed.Load() {
			t.Error("a send after the last flush")
		}
		sent.WriteString(text)
		sends.Add(1)
		sending.Add(-1)
	})
	b.after = func(_ time.Duration, f func()) func() bool {
		mu.Lock()
		timers = append(timers, f)
		mu.Unlock()
		return func() bool { return true }
	}
	fire := func() {
		mu.Lock()
		fs := timers
		timers = nil
		mu.Unlock()
		for _, f := range fs {
			f()
		}
	}
	var wg sync.WaitGroup
	var want strings.Builder
	for i := range 2000 {
		d := string(rune('a' + i%26))
		want.WriteString(d)
		b.add(d)
		b.add("") // nothing to gather
		switch {
		case i%97 == 0:
			b.flush()
		case i%13 == 0:
			wg.Go(fire) // a timer firing beside the step
		}
	}
	wg.Wait()
	b.flush()
	closed.Store(true)
	fire() // timers stopped by the last flush, firing anyway
	if sent.String() != want.String() {
		t.Fatalf("sent %d bytes, want the %d bytes of the deltas in order", sent.Len(), want.Len())
	}
	if n := sends.Load(); n < 2 || n >= 2000 {
		t.Fatalf("%d sends for 2000 deltas", n)
	}
}
