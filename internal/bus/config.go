package bus

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Config tunes the streams and consumers a [Bus] declares. The zero value
// is usable: every field has a documented default applied by
// [Config.WithDefaults]. Negative values are errors, never "use default".
type Config struct {
	// Replicas is the replica count of both streams and the object store.
	// Default 1; at most 5 (a JetStream limit).
	Replicas int
	// Storage is the storage backend of both streams and the object store.
	// Default (the zero value) jetstream.FileStorage.
	Storage jetstream.StorageType
	// AckWait is how long a delivered job may stay unacknowledged before it is
	// redelivered. Workers extend it with [Delivery.InProgress] or
	// [Delivery.KeepAlive]. Default 30s. When Backoff is set the server uses
	// Backoff's values instead (Backoff[0] for the first delivery).
	AckWait time.Duration
	// MaxDeliver is how many times a job is delivered at most; after that
	// it stays in the stream but is never delivered again (a dead letter,
	// visible with nats consumer info). Default 5.
	MaxDeliver int
	// Backoff is the redelivery schedule for deliveries that time out without
	// a Nak: the ack deadline of the k-th delivery is Backoff[min(k-1,
	// len-1)]. len(Backoff) must be < MaxDeliver and every value > 0.
	// Default nil (AckWait for every delivery).
	Backoff []time.Duration
	// DedupeWindow is how long JetStream remembers a job's Nats-Msg-Id
	// (its StepID): publishing the same step again within the window stores
	// nothing. Default 2m.
	DedupeWindow time.Duration
	// EventsMaxAge is how long events are kept in RATH_EVENTS. Default 24h.
	EventsMaxAge time.Duration
	// EventsMaxBytes bounds what RATH_EVENTS keeps: past it the oldest
	// events are dropped first. Events are a live feed (Postgres keeps the
	// record) whose volume tenants' agents decide (a step's tokens), and
	// they share JetStream's storage with the job stream: unbounded, they
	// could fill it until no job could be published. The stream reserves
	// this much of the server's (account's) storage, and the server holds
	// an index of the stream's subjects in memory: with every event a
	// message on its run's own subject, NATS' resident memory at the bound
	// was ~1.5x the bound; with fast steps' events in batches (one message
	// a step, [Bus.PublishEvents]) about half the bound (docs/BENCHMARKS.md).
	// Default 256 MiB; at least MinEventsMaxBytes.
	EventsMaxBytes int64
	// MaxAckPending caps the unacknowledged jobs of one queue consumer (all
	// workers of the queue together). Default 1024. It also caps n in
	// [Consumer.Fetch].
	MaxAckPending int
	// Bind makes [New] look the streams and the object store up instead of
	// declaring them: for connections whose NATS permissions allow no
	// stream administration (workers under package natsauth). The
	// coordinator declares them; New waits up to a minute for that, then
	// fails.
	Bind bool
	// Logger receives debug and warning records. Default: discard.
	Logger *slog.Logger
	// NowFunc is the clock used to stamp Job.CreatedAt and Event.Time when
	// they are zero. Default time.Now.
	NowFunc func() time.Time
}

// Defaults applied by [Config.WithDefaults].
const (
	DefaultReplicas      = 1
	DefaultAckWait       = 30 * time.Second
	DefaultMaxDeliver    = 5
	DefaultDedupeWindow  = 2 * time.Minute
	DefaultEventsMaxAge  = 24 * time.Hour
	DefaultMaxAckPending = 1024
	// DefaultEventsMaxBytes holds the events of about 160,000 one-step
	// runs sent an event a message, or 190,000 whose step ended within its
	// worker's linger (one message), and keeps NATS' resident memory for
	// them (~370-400 MB and ~110-140 MB at this bound, docs/BENCHMARKS.md,
	// twenty-fourth and twenty-fifth rounds) inside the NATS pods' 512 MiB
	// request.
	DefaultEventsMaxBytes = 256 << 20
	// MinEventsMaxBytes is the smallest EventsMaxBytes: several of the
	// largest events.
	MinEventsMaxBytes = 8 << 20
)

// WithDefaults returns a copy of c with every zero field set to its default.
// The Backoff slice is copied, so the caller may reuse its own.
func (c Config) WithDefaults() Config {
	c.Replicas = cmp.Or(c.Replicas, DefaultReplicas)
	c.AckWait = cmp.Or(c.AckWait, DefaultAckWait)
	c.MaxDeliver = cmp.Or(c.MaxDeliver, DefaultMaxDeliver)
	c.Backoff = slices.Clone(c.Backoff)
	c.DedupeWindow = cmp.Or(c.DedupeWindow, DefaultDedupeWindow)
	c.EventsMaxAge = cmp.Or(c.EventsMaxAge, DefaultEventsMaxAge)
	c.EventsMaxBytes = cmp.Or(c.EventsMaxBytes, DefaultEventsMaxBytes)
	c.MaxAckPending = cmp.Or(c.MaxAckPending, DefaultMaxAckPending)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.NowFunc == nil {
		c.NowFunc = time.Now
	}
	return c
}

// validate checks a config that has been through WithDefaults.
func (c Config) validate() error {
	switch {
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf("%w: Replicas = %d, want 1..5", ErrInvalidConfig, c.Replicas)
	case c.Storage != jetstream.FileStorage && c.Storage != jetstream.MemoryStorage:
		return fmt.Errorf("%w: Storage = %d, want FileStorage or MemoryStorage", ErrInvalidConfig, c.Storage)
	case c.AckWait < time.Millisecond:
		return fmt.Errorf("%w: AckWait = %s, want >= 1ms", ErrInvalidConfig, c.AckWait)
	case c.MaxDeliver < 1:
		return fmt.Errorf("%w: MaxDeliver = %d, want >= 1", ErrInvalidConfig, c.MaxDeliver)
	case len(c.Backoff) >= c.MaxDeliver && len(c.Backoff) > 0:
		return fmt.Errorf("%w: len(Backoff) = %d, want < MaxDeliver (%d)", ErrInvalidConfig, len(c.Backoff), c.MaxDeliver)
	case c.DedupeWindow < time.Millisecond:
		return fmt.Errorf("%w: DedupeWindow = %s, want >= 1ms", ErrInvalidConfig, c.DedupeWindow)
	case c.EventsMaxAge < time.Second:
		return fmt.Errorf("%w: EventsMaxAge = %s, want >= 1s", ErrInvalidConfig, c.EventsMaxAge)
	case c.EventsMaxBytes < MinEventsMaxBytes:
		return fmt.Errorf("%w: EventsMaxBytes = %d, want >= %d (8 MiB)", ErrInvalidConfig, c.EventsMaxBytes, MinEventsMaxBytes)
	case c.MaxAckPending < 1:
		return fmt.Errorf("%w: MaxAckPending = %d, want >= 1", ErrInvalidConfig, c.MaxAckPending)
	}
	for i, d := range c.Backoff {
		if d < time.Millisecond {
			return fmt.Errorf("%w: Backoff[%d] = %s, want >= 1ms", ErrInvalidConfig, i, d)
		}
	}
	return nil
}

// shortestAckWait is the shortest ack deadline any delivery can get: the
// default KeepAlive interval is derived from it.
func (c Config) shortestAckWait() time.Duration {
	if len(c.Backoff) == 0 {
		return c.AckWait
	}
	return slices.Min(c.Backoff)
}
