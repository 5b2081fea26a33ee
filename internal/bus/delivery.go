package bus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Delivery is one delivery of a job to a worker. The worker settles it
// exactly once with Ack, Nak or Term; until then it keeps it alive with
// InProgress or KeepAlive. Its methods are safe for concurrent use (a
// KeepAlive goroutine may run while the worker acks).
type Delivery struct {
	// Job is the decoded envelope; when Err is set it holds whatever could
	// be decoded.
	Job Job
	// Header is the message's headers (Nats-Msg-Id, Rath-Job-Version, trace
	// context); read it through [HeaderCarrier] for propagation.
	Header nats.Header
	// Err is non-nil, wrapping ErrMalformedJob, when the payload could not
	// be decoded (bad JSON, unknown envelope version, invalid fields). The
	// worker should Term the delivery with Err's text as the reason.
	Err error

	msg          jetstream.Msg
	numDelivered uint64
	numPending   uint64 // jobs of the queue not yet delivered, when this one was
	streamSeq    uint64
	ackWait      time.Duration
	b            *Bus
}

func (c *Consumer) newDelivery(m jetstream.Msg) *Delivery {
	d := &Delivery{
		Header:  m.Headers(),
		msg:     m,
		ackWait: c.b.cfg.shortestAckWait(),
		b:       c.b,
	}
	if md, err := m.Metadata(); err == nil {
		d.numDelivered = md.NumDelivered
		d.numPending = md.NumPending
		d.streamSeq = md.Sequence.Stream
	}
	d.Job, d.Err = decodeJob(d.Header, m.Data())
	return d
}

// NumDelivered returns how many times this job has been delivered,
// including this delivery: 1 the first time.
func (d *Delivery) NumDelivered() uint64 { return d.numDelivered }

// StreamSeq returns the job's sequence number in RATH_JOBS; it is the same
// on every redelivery.
func (d *Delivery) StreamSeq() uint64 { return d.streamSeq }

// Data returns the raw payload (for logging a malformed job).
func (d *Delivery) Data() []byte { return d.msg.Data() }

// InProgress tells the server the job is still being worked on, resetting
// its ack deadline. It is fire-and-forget: an error means it was not sent.
func (d *Delivery) InProgress() error {
	if err := d.msg.InProgress(); err != nil {
		return fmt.Errorf("in progress %s: %w", d.ref(), translate(context.Background(), err))
	}
	return nil
}

// Ack acknowledges the job and waits for the server to confirm
// (DoubleAck): on a nil error the job is gone from the work queue and will
// not be redelivered. On ErrUnavailable the ack may or may not have been
// applied; the step must be idempotent (commits are keyed by step id).
func (d *Delivery) Ack(ctx context.Context) error {
	if err := d.msg.DoubleAck(ctx); err != nil {
		return fmt.Errorf("ack %s: %w", d.ref(), translate(ctx, err))
	}
	return nil
}

// AckNoWait acknowledges the job without waiting for the server to
// confirm: one message to the server and none back. It is for a caller
// whose job is idempotent and recorded elsewhere (a worker's committed
// step): should the ack be lost (a connection that drops before sending
// it, a server restart), the job is redelivered after its ack wait and
// the redelivery finds the work done. A nil error means the ack was
// queued on the connection, which sends it before anything published or
// requested after it; closing the connection flushes it.
func (d *Delivery) AckNoWait() error {
	if err := d.msg.Ack(); err != nil {
		return fmt.Errorf("ack %s: %w", d.ref(), translate(context.Background(), err))
	}
	return nil
}

// Nak asks for redelivery after delay (0: at once). It is fire-and-forget
// and counts toward MaxDeliver.
func (d *Delivery) Nak(delay time.Duration) error {
	var err error
	switch {
	case delay < 0:
		return fmt.Errorf("%w: nak delay = %s, want >= 0", ErrInvalidConfig, delay)
	case delay == 0:
		err = d.msg.Nak()
	default:
		err = d.msg.NakWithDelay(delay)
	}
	if err != nil {
		return fmt.Errorf("nak %s: %w", d.ref(), translate(context.Background(), err))
	}
	return nil
}

// Term stops all redelivery of the job (it leaves the work queue); reason
// is recorded in the server's advisory. Fire-and-forget.
func (d *Delivery) Term(reason string) error {
	var err error
	if reason == "" {
		err = d.msg.Term()
	} else {
		err = d.msg.TermWithReason(reason)
	}
	if err != nil {
		return fmt.Errorf("term %s: %w", d.ref(), translate(context.Background(), err))
	}
	return nil
}

// KeepAlive calls InProgress every interval until stop is called or ctx
// ends, so a long step is not redelivered while it runs. interval <= 0
// means a third of the shortest ack deadline (AckWait, or the smallest
// Backoff value). It also ends once the delivery has been settled. stop
// waits for the goroutine to exit and may be called more than once.
func (d *Delivery) KeepAlive(ctx context.Context, interval time.Duration) (stop func()) {
	if interval <= 0 {
		interval = max(d.ackWait/3, time.Millisecond)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				err := d.msg.InProgress()
				if errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
					return
				}
				if err != nil {
					// Disconnected: keep trying, the deadline may still be
					// saved once the connection is back.
					d.b.cfg.Logger.WarnContext(ctx, "bus: keepalive failed", "step_id", d.Job.StepID, "error", err.Error())
				}
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
}

func (d *Delivery) ref() string {
	if d.Job.StepID != "" {
		return "job " + d.Job.StepID
	}
	return fmt.Sprintf("job seq %d", d.streamSeq)
}
