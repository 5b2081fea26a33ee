package runs

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/testenv"
)

// heldSends is a coalescer's send that records each statement's items and
// holds the first statement until release is closed.
type heldSends struct {
	mu      sync.Mutex
	sent    [][]int
	entered chan struct{} // closed when the first statement is sent
	release chan struct{}
}

func newHeldSends() *heldSends {
	return &heldSends{entered: make(chan struct{}), release: make(chan struct{})}
}

func (h *heldSends) send(_ context.Context, items []int) error {
	h.mu.Lock()
	h.sent = append(h.sent, slices.Clone(items))
	first := len(h.sent) == 1
	h.mu.Unlock()
	if first {
		close(h.entered)
		<-h.release
	}
	return nil
}

func (h *heldSends) statements() [][]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.sent)
}

// TestCoalescerQueuesBehindTheStatementInFlight: calls that arrive while a
// statement is in flight wait for it, even with room for a second in
// flight, and go together as the next statement; they do not go alone
// beside it (nineteenth round of issue 25: a second statement sent at
// once is mostly a statement of one).
func TestCoalescerQueuesBehindTheStatementInFlight(t *testing.T) {
	ctx := context.Background()
	h := newHeldSends()
	c := &coalescer[int]{send: h.send, max: 16, inFlight: 2, stall: time.Hour}
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.do(ctx, 0) })
	<-h.entered
	for i := 1; i <= 5; i++ {
		wg.Go(func() { _ = c.do(ctx, i) })
	}
	testenv.Eventually(t, 10*time.Second, "the five calls to queue", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.queue) == 5
	})
	if got := h.statements(); len(got) != 1 {
		t.Fatalf("statements sent while the first was in flight: %v; want only the first", got)
	}
	close(h.release)
	wg.Wait()
	got := h.statements()
	if len(got) != 2 || len(got[1]) != 5 {
		t.Fatalf("statements %v; want the first alone, then the five queued as one", got)
	}
}

// TestCoalescerSpillsPastAStalledStatement: calls queued behind a
// statement that does not finish go as a further statement once it has
// held them for the stall time, when there is room for one in flight.
func TestCoalescerSpillsPastAStalledStatement(t *testing.T) {
	ctx := context.Background()
	h := newHeldSends()
	c := &coalescer[int]{send: h.send, max: 16, inFlight: 2, stall: time.Millisecond}
	first := make(chan error, 1)
	go func() { first <- c.do(ctx, 0) }()
	<-h.entered
	done := make(chan error, 1)
	go func() { done <- c.do(ctx, 1) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("a call queued behind a held statement was not sent: statements %v", h.statements())
	}
	close(h.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(h.statements()), "[[0] [1]]"; got != want {
		t.Fatalf("statements %s; want %s", got, want)
	}

	// With one statement in flight at most, the queue waits for it
	// however long it takes.
	h = newHeldSends()
	c = &coalescer[int]{send: h.send, max: 16, inFlight: 1, stall: time.Millisecond}
	go func() { first <- c.do(ctx, 0) }()
	<-h.entered
	go func() { done <- c.do(ctx, 1) }()
	testenv.Eventually(t, 10*time.Second, "the call to queue", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.queue) == 1
	})
	select {
	case err := <-done:
		t.Fatalf("a call went beside the one statement allowed in flight (%v): statements %v", err, h.statements())
	case <-time.After(50 * time.Millisecond):
	}
	close(h.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
