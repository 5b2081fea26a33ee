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

	// mu is held while sending too: a timer's send and a flush never
	// overlap, and a flush returns after any send in progress.
	mu    sync.Mutex
	buf   strings.Builder
	timer *time.Timer
}

func newTokenBatcher(every time.Duration, send func(text string)) *tokenBatcher {
	return &tokenBatcher{every: every, send: send}
}

// add gathers a delta.
func (b *tokenBatcher) add(delta string) {
	if delta == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(delta)
	if b.timer == nil {
		b.timer = time.AfterFunc(b.every, b.flush)
	}
}

// flush sends the gathered text, if any.
func (b *tokenBatcher) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	if b.buf.Len() == 0 {
		return
	}
	text := b.buf.String()
	b.buf.Reset()
	b.send(text)
}
