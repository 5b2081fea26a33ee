// Package bus is the JetStream layer of Rath's execution spine: it carries
// step jobs from the coordinator to workers and run events from everyone to
// watchers. Postgres is the source of truth; the bus may lose or repeat a
// message, and nothing may depend on it for the durability of results.
//
// # What New declares
//
// [New] declares, idempotently, on the connection it is given:
//
//   - stream RATH_JOBS, subjects rath.jobs.<queue>, work-queue retention (an
//     acked or terminated job is deleted), duplicate window
//     Config.DedupeWindow;
//   - stream RATH_EVENTS, subjects rath.events.<run>.<type>, limits
//     retention with max age Config.EventsMaxAge;
//   - object store rath-workspaces for workspace snapshots.
//
// # Jobs
//
// A [Job] is a versioned JSON envelope ([JobVersion]): "forward session
// version Input through Target". [Bus.Publish] validates it, sets
// Nats-Msg-Id to its StepID (so publishing a step twice stores it once:
// duplicate=true) and waits for the server's acknowledgement.
//
// Each queue has exactly one durable pull consumer, jobs-<queue>, shared by
// all its workers ([Bus.Consumer]); a work-queue stream refuses
// overlapping consumers. Workers call [Consumer.Fetch] and settle every
// [Delivery] exactly once:
//
//   - [Delivery.AckNoWait] after the step's outcome is recorded (the
//     worker's case: a lost ack costs a redelivery that finds the step
//     ended), or [Delivery.Ack], confirmed by the server (DoubleAck);
//   - [Delivery.Nak] to retry after a delay (transient failure);
//   - [Delivery.Term] to give up (permanent failure, malformed job).
//
// A delivery not settled within the ack deadline (Config.AckWait, or the
// Config.Backoff schedule) is redelivered, at most Config.MaxDeliver times
// in all; [Delivery.KeepAlive] extends the deadline while a step runs.
// Delivery is therefore at-least-once: a step can run again after a crash
// or a lost ack, and the commit, keyed by step id, makes the repeat a no-op.
// A message that cannot be decoded is returned as a Delivery with Err set
// (wrapping [ErrMalformedJob]) rather than failing Fetch.
//
// # Events
//
// [Bus.PublishEvent] publishes without waiting (events are best effort);
// [Bus.PublishProgress] publishes without asking for an acknowledgement at
// all, for the events inside a step that an acknowledged one follows;
// [Bus.PublishEvents] and [Bus.PublishProgressEvents] publish one run's
// events as one message (a batch, on its last event's subject), which
// every reader below unpacks ([DecodeEvents] for readers of raw subjects);
// [Bus.WatchRun] replays a run's events from the start and then follows it
// live ([Bus.WatchRunAfter] from a stream sequence, with each event's
// sequence), holding an ordered consumer while it lasts; [Bus.ReplayRun]
// reads a run's stored events with direct gets and no consumer (the events
// stream allows direct gets); [Bus.SubscribeEvents] hands over the new
// events of some types, of every run, through core subscriptions, with no
// consumer and nothing read back from the stream (the coordinator's step
// waits use it, [Bus.SubscribeRunAborts] is its kind for workers). Trace context travels
// in message headers through [HeaderCarrier].
//
// # Errors
//
// NATS and JetStream errors are translated at this boundary into the
// package's sentinels ([ErrUnavailable], [ErrTooLarge], ...), with the
// original error kept in the chain; validation errors name the field and
// the limit.
//
// Package [github.com/rath-run/rath/internal/bus/embedded] runs a NATS server
// in-process (tests, rathctl dev) and package bustest wires one up for a
// test.
package bus
