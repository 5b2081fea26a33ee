package bus

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Sentinel errors. NATS and JetStream errors are translated into these at
// the package boundary (the original error stays in the chain), so callers
// branch with errors.Is without importing nats.go.
var (
	// ErrInvalidConfig: a Config field is out of range; the message names it.
	ErrInvalidConfig = errors.New("bus: invalid config")
	// ErrInvalidJob: a Job (or its headers) fails validation; the message
	// names the field.
	ErrInvalidJob = errors.New("bus: invalid job")
	// ErrInvalidEvent: an Event or a run id fails validation; the message
	// names the field.
	ErrInvalidEvent = errors.New("bus: invalid event")
	// ErrInvalidQueue: a queue name is not a subject token [a-z0-9_-]{1,64}.
	ErrInvalidQueue = errors.New("bus: invalid queue name")
	// ErrTooLarge: an encoded job or event exceeds its size limit
	// ([MaxJobSize], [MaxEventSize] or the server's max_payload).
	ErrTooLarge = errors.New("bus: message too large")
	// ErrMalformedJob: a delivered message cannot be decoded into a [Job]
	// (bad JSON, unknown envelope version, invalid fields). It is reported in
	// [Delivery.Err]; the worker should [Delivery.Term] the delivery.
	ErrMalformedJob = errors.New("bus: malformed job")
	// ErrUnavailable: the NATS server or JetStream cannot be reached right
	// now (no responders, timeout, disconnected, closed connection). The
	// operation may be retried.
	ErrUnavailable = errors.New("bus: jetstream unavailable")
)

// translate wraps err with the matching sentinel, keeping err in the chain.
// A cancellation by the caller is returned unchanged so that it reads as
// cancellation; a deadline (the caller's or the client's own request
// timeout) while waiting for the server is ErrUnavailable as well as
// context.DeadlineExceeded.
func translate(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return err
	}
	switch {
	case errors.Is(err, nats.ErrMaxPayload):
		return fmt.Errorf("%w: %w", ErrTooLarge, err)
	case errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, jetstream.ErrNoHeartbeat),
		errors.Is(err, jetstream.ErrJetStreamNotEnabled),
		errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrConnectionClosed),
		errors.Is(err, nats.ErrConnectionDraining),
		errors.Is(err, nats.ErrConnectionReconnecting),
		errors.Is(err, nats.ErrDisconnected),
		errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}
