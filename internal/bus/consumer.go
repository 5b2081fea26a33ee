package bus

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ConsumerName returns the durable consumer name of a queue: jobs-<queue>.
func ConsumerName(queue string) string { return "jobs-" + queue }

// Consumer is the durable pull consumer of one queue. Every worker of the
// queue shares it (a work-queue stream refuses overlapping consumers), so
// each job goes to one worker at a time. It is safe for concurrent use:
// several goroutines may Fetch at once.
type Consumer struct {
	b     *Bus
	queue string
	cons  jetstream.Consumer
	// idle is a hint for Fetch: the last job delivered said no other job
	// was waiting behind it (its NumPending), so a no-wait batch would
	// most likely come back empty.
	idle atomic.Bool
}

// Consumer declares (CreateOrUpdateConsumer, so idempotent) and returns the
// durable pull consumer jobs-<queue>: filter rath.jobs.<queue>, explicit
// acks, and AckWait, MaxDeliver, Backoff and MaxAckPending from the bus
// Config. When workers run with different Configs, the last declaration
// wins. An empty queue means DefaultQueue.
func (b *Bus) Consumer(ctx context.Context, queue string) (*Consumer, error) {
	if queue == "" {
		queue = DefaultQueue
	}
	if err := ValidQueue(queue); err != nil {
		return nil, err
	}
	cons, err := b.js.CreateOrUpdateConsumer(ctx, JobsStream, jetstream.ConsumerConfig{
		Durable:       ConsumerName(queue),
		Description:   "Rath workers of queue " + queue,
		FilterSubject: JobSubject(queue),
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       b.cfg.AckWait,
		MaxDeliver:    b.cfg.MaxDeliver,
		BackOff:       b.cfg.Backoff,
		MaxAckPending: b.cfg.MaxAckPending,
	})
	if err != nil {
		return nil, fmt.Errorf("declare consumer %s: %w", ConsumerName(queue), translate(ctx, err))
	}
	return &Consumer{b: b, queue: queue, cons: cons}, nil
}

// Queue returns the queue name.
func (c *Consumer) Queue() string { return c.queue }

// Fetch returns up to n jobs (n >= 1; more than MaxAckPending counts as
// MaxAckPending, all the server would deliver anyway), waiting up to
// maxWait for the first one. It takes whatever is ready now, up to n,
// without waiting; only when nothing is ready does it wait, up to maxWait,
// and then returns the first job that arrives on its own. It returns an
// empty slice and a nil error when maxWait passes with no job; maxWait
// below 1ms does not wait at all.
//
// While the queue keeps up (the last job delivered had none waiting behind
// it), Fetch goes straight to the wait, which returns at once with a job
// that is there: one request to the server a job, not two. A job that
// arrives with others behind it brings back the batches, so after an idle
// spell the first fetch of a burst returns one job and the next ones up
// to n.
//
// Fetch never holds a delivered job back to fill a batch: a batch that
// waited to fill for longer than AckWait would collect redeliveries of its
// own jobs, and each job's ack deadline runs from the moment the server
// sends it.
//
// A message that cannot be decoded is still returned, as a Delivery whose
// Err wraps ErrMalformedJob; Term it.
//
// When ctx ends first, Fetch returns ctx's error at once; jobs received
// but not returned are Nak'ed so another worker gets them at once (that
// counts as a delivery toward MaxDeliver). A long poll given up on stays
// open at the server until maxWait has passed (or the connection closes),
// and a goroutine Naks what it still receives, ending a second after: a
// job sent to it meanwhile spends a delivery (with MaxDeliver 1, its
// only one). A caller that can wait lets the poll run out instead
// (package worker does at shutdown). Server trouble is reported as
// ErrUnavailable; callers should back off and retry.
func (c *Consumer) Fetch(ctx context.Context, n int, maxWait time.Duration) ([]*Delivery, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: fetch n = %d, want at least 1", ErrInvalidConfig, n)
	}
	n = min(n, c.b.cfg.MaxAckPending)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// A no-wait batch first, unless its answer is most likely "no
	// messages": a single job is what the long poll asks for anyway, and
	// when the last job delivered had none behind it the queue is keeping
	// up, and each job would cost two requests instead of one. The hint
	// may be stale either way; the long poll still returns at once with a
	// job that is there, and its job's count restores the batches.
	if maxWait < time.Millisecond || (n > 1 && !c.idle.Load()) {
		batch, err := c.cons.FetchNoWait(n)
		out, err := c.collect(ctx, batch, err)
		if err != nil || len(out) > 0 || maxWait < time.Millisecond {
			return out, err
		}
	}
	// Nothing ready: long-poll for one job. The pull request expires on
	// the server after maxWait, and the client waits for the server's
	// word that it has (FetchMaxWait): a job the server sends just before
	// then is received, not dropped. FetchContext would give up at its
	// context's deadline with such a job unread, delivered and lost to
	// the worker until its AckWait ran out (with MaxDeliver 1, for good).
	batch, err := c.cons.Fetch(1, jetstream.FetchMaxWait(maxWait))
	return c.collect(ctx, batch, err)
}

// collect drains a batch into deliveries and translates its outcome.
// When ctx ends first, it returns ctx's error at once and leaves the
// batch to nakLate.
func (c *Consumer) collect(ctx context.Context, batch jetstream.MessageBatch, err error) ([]*Delivery, error) {
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", ConsumerName(c.queue), translate(ctx, err))
	}
	var out []*Delivery
	msgs := batch.Messages()
	for open := true; open; {
		select {
		case m, ok := <-msgs:
			if open = ok; ok {
				d := c.newDelivery(m)
				c.idle.Store(d.numPending == 0)
				out = append(out, d)
			}
		case <-ctx.Done():
			go nakLate(msgs)
			open = false
		}
	}
	if ctx.Err() != nil {
		for _, d := range out {
			_ = d.msg.Nak()
		}
		return nil, ctx.Err()
	}
	err = batch.Error()
	if err == nil || isContextErr(err) || errors.Is(err, jetstream.ErrNoMessages) {
		return out, nil
	}
	if len(out) > 0 {
		// The batch was cut short; hand over what arrived, the next Fetch
		// reports the trouble again if it persists.
		c.b.cfg.Logger.DebugContext(ctx, "bus: fetch cut short", "consumer", ConsumerName(c.queue), "received", len(out), "error", err.Error())
		return out, nil
	}
	return nil, fmt.Errorf("fetch %s: %w", ConsumerName(c.queue), translate(ctx, err))
}

// nakLate Naks the jobs a long poll its caller gave up on still receives,
// so that another worker gets them at once, until the poll ends (its
// maxWait and a second after: nats.go's wait for the server's word). The
// poll's pull request stays open at the server meanwhile, unless the
// connection closes.
func nakLate(msgs <-chan jetstream.Msg) {
	for m := range msgs {
		_ = m.Nak()
	}
}

// Pending returns the consumer's lag: jobs waiting to be delivered and jobs
// delivered but not yet acknowledged. It is what an autoscaler watches.
func (c *Consumer) Pending(ctx context.Context) (waiting, unacked uint64, err error) {
	info, err := c.cons.Info(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("consumer info %s: %w", ConsumerName(c.queue), translate(ctx, err))
	}
	return info.NumPending, uint64(info.NumAckPending), nil
}
