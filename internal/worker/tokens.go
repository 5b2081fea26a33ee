package worker

import (
	"strings"
	"sync"
	"time"
)

// tokenEvery is how often a step publishes the model's streamed text: a
// model streams a delta per token, and each step.token event is a message
// JetStream stores, so the deltas of each interval go out as one event.
const tokenEvery = 50 * time.Millisecond

// tokenBatcher coalesces a step's token deltas into step.token events:
// the first delta of an interval starts its timer, and the text gathered
// by then goes out as one event. flush sends what is gathered at once; a
// step flushes before any other event it publishes (a tool call, its
// commit), so events keep their order and the text its bytes.
type tokenBatcher struct {
	every time.Duration
	send  func(text string)
	// after runs f once d has passed and returns what stops it
	// (time.AfterFunc; tests fire it themselves).
	after func(d time.Duration, f func()) (stop func() bool)

	// mu is held while sending too: a timer's send and a flush never
	// overlap, and a flush returns after any send in progress.
	mu   sync.Mutex
	buf  strings.Builder
	stop func() bool // the pending timer's, or nil
}

func newTokenBatcher(every time.Duration, send func(text string)) *tokenBatcher {
	return &tokenBatcher{every: every, send: send, after: func(d time.Duration, f func()) func() bool {
		return time.AfterFunc(d, f).Stop
	}}
}

// add gathers a delta.
func (b *tokenBatcher) add(delta string) {
	if delta == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(delta)
	if b.stop == nil {
		b.stop = b.after(b.every, b.flush)
	}
}

// flush sends the gathered text, if any.
func (b *tokenBatcher) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stop != nil {
		b.stop()
		b.stop = nil
	}
	if b.buf.Len() == 0 {
		return
	}
	text := b.buf.String()
	b.buf.Reset()
	b.send(text)
}
