package runs

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rath-run/rath/pkg/store/pgstore"
)

// coalescer sends calls of one kind of statement so that concurrent ones
// share a statement: when no statement is in flight a call goes alone at
// once; calls arriving meanwhile go together as the next statement (one
// transaction, one WAL flush, one statement's setup in Postgres for the
// group), once the one in flight is done, or after pgstore.StallAfter if
// it is not and fewer than inFlight are in flight. send writes the items
// of a call or group, setting their results in the items themselves; it
// must handle a single item.
//
// A group the server refused (send returns a *pgconn.PgError, or an error
// send marks with errSendAlone) wrote nothing, and each of its items is
// sent again alone, so each caller gets its own answer. Any other error
// (a broken connection, the group's time limit) goes to every member as
// is: whether the group was written is unknown, as for any statement
// whose connection fails, and sending it again could apply it twice.
//
// More than one statement in flight keeps one stuck statement (a row lock
// held elsewhere, a connection gone silent) from holding every other call
// of the process behind it. A further statement waits for
// pgstore.StallAfter first, as pgstore's commit groups do: sent the
// moment a call arrives, it is mostly a statement of one, and a step
// started alone costs Postgres about twice what one started in a group
// does (issue 25, nineteenth round). Used on Postgres for the journal's
// appends and the steps' starts.
type coalescer[T any] struct {
	send     func(ctx context.Context, items []T) error
	max      int           // the most items one statement takes
	inFlight int           // the most statements in flight (0: 1)
	stall    time.Duration // 0: pgstore.StallAfter

	mu      sync.Mutex
	sending int           // statements in flight
	queue   []*waiting[T] // arrived meanwhile; not sent yet
	// spill, while set, sends the queue as a further statement once the
	// statement in flight has held it for the stall time (see do).
	spill *time.Timer
}

// waiting is a call queued in a coalescer.
type waiting[T any] struct {
	item T
	done chan struct{} // closed once err is set
	err  error
}

// errSendAlone marks a group send refused before anything was written:
// each of its items goes alone.
var errSendAlone = errors.New("send each alone")

// groupTimeout bounds a group sent on behalf of other callers.
const groupTimeout = 30 * time.Second

// do sends item, alone or with others, and returns its error.
func (c *coalescer[T]) do(ctx context.Context, item T) error {
	c.mu.Lock()
	if c.sending == 0 {
		c.sending++
		c.mu.Unlock()
		err := c.send(ctx, []T{item})
		c.next(ctx)
		return err
	}
	w := &waiting[T]{item: item, done: make(chan struct{})}
	c.queue = append(c.queue, w)
	if c.sending < max(c.inFlight, 1) && c.spill == nil {
		c.spill = time.AfterFunc(cmp.Or(c.stall, pgstore.StallAfter), func() { c.spillOver(ctx) })
	}
	c.mu.Unlock()
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		c.mu.Lock()
		if i := slices.Index(c.queue, w); i >= 0 {
			// Not sent: nothing of it is written.
			c.queue = slices.Delete(c.queue, i, i+1)
			c.mu.Unlock()
			return ctx.Err()
		}
		c.mu.Unlock()
		// Sent: its statement is in flight; its result is the answer.
		<-w.done
		return w.err
	}
}

// spillOver sends the queue as a further statement, when there is room
// for one: the statement in flight has kept it waiting for the stall
// time. next detaches ctx from its caller's cancellation.
func (c *coalescer[T]) spillOver(ctx context.Context) {
	c.mu.Lock()
	c.spill = nil
	if len(c.queue) == 0 || c.sending >= max(c.inFlight, 1) {
		c.mu.Unlock()
		return
	}
	c.sending++
	c.mu.Unlock()
	c.next(ctx)
}

// next sends the calls queued while a statement was in flight, as one
// group, from a goroutine of its own (the caller that sent the last
// statement returns at once), and so on until none are queued; then it
// gives its place in flight back.
func (c *coalescer[T]) next(ctx context.Context) {
	c.mu.Lock()
	if len(c.queue) == 0 {
		c.sending--
		c.mu.Unlock()
		return
	}
	n := min(len(c.queue), c.max)
	group := slices.Clone(c.queue[:n])
	c.queue = slices.Delete(c.queue, 0, n)
	if len(c.queue) == 0 && c.spill != nil {
		c.spill.Stop()
		c.spill = nil
	}
	c.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), groupTimeout)
		defer cancel()
		items := make([]T, len(group))
		for i, w := range group {
			items[i] = w.item
		}
		err := c.send(ctx, items)
		var pgErr *pgconn.PgError
		if len(group) > 1 && (errors.As(err, &pgErr) || errors.Is(err, errSendAlone)) {
			// Refused as a group: nothing was written; each alone.
			for _, w := range group {
				w.err = c.send(ctx, []T{w.item})
				close(w.done)
			}
		} else {
			for _, w := range group {
				w.err = err
				close(w.done)
			}
		}
		c.next(ctx)
	}()
}
