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

// Names of what [New] declares.
const (
	// JobsStream holds step jobs, one subject per queue.
	JobsStream = "RATH_JOBS"
	// JobsSubjects is the subject filter of JobsStream.
	JobsSubjects = "rath.jobs.>"
	// EventsStream holds run events.
	EventsStream = "RATH_EVENTS"
	// EventsSubjects is the subject filter of EventsStream.
	EventsSubjects = "rath.events.>"
	// WorkspacesBucket is the object store of workspace snapshots.
	WorkspacesBucket = "rath-workspaces"
)

// Bus is Rath's view of JetStream: the job and event streams, the queue
// consumers and the workspace object store. It is safe for concurrent use.
// It does not own the *nats.Conn it was built on: closing the connection is
// the caller's job (after [Bus.FlushEvents] if pending events matter).
type Bus struct {
	nc         *nats.Conn
	js         jetstream.JetStream
	cfg        Config
	workspaces jetstream.ObjectStore

	eventsMu sync.Mutex       // guards events
	events   jetstream.Stream // RATH_EVENTS, looked up on first use (eventsStream)
}

// New declares the streams RATH_JOBS (subjects rath.jobs.>, work-queue
// retention, duplicate window cfg.DedupeWindow) and RATH_EVENTS
// (rath.events.>, limits retention, max age cfg.EventsMaxAge, at most
// cfg.EventsMaxBytes, the oldest dropped first) and the object
// store bucket rath-workspaces. Declaring is idempotent
// (CreateOrUpdateStream), so every coordinator and worker calls New at
// start; a changed Config updates the existing streams.
func New(ctx context.Context, nc *nats.Conn, cfg Config) (*Bus, error) {
	if nc == nil {
		return nil, fmt.Errorf("%w: nil *nats.Conn", ErrInvalidConfig)
	}
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b := &Bus{nc: nc, cfg: cfg}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncErrHandler(b.asyncPublishFailed))
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", translate(ctx, err))
	}
	b.js = js
	if cfg.Bind {
		return b.bind(ctx)
	}

	// Checked before anything is declared: a mode that cannot be kept
	// changes nothing.
	persist, err := eventsPersistMode(ctx, js, cfg)
	if err != nil {
		return nil, err
	}
	_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        JobsStream,
		Description: "Rath step jobs (rath.jobs.<queue>); acked jobs are deleted",
		Subjects:    []string{JobsSubjects},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     cfg.Storage,
		Replicas:    cfg.Replicas,
		Duplicates:  cfg.DedupeWindow,
		// The envelope limit plus room for headers (trace context).
		MaxMsgSize: MaxJobSize + 64<<10,
	})
	if err != nil {
		return nil, fmt.Errorf("declare stream %s: %w", JobsStream, translate(ctx, err))
	}
	_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        EventsStream,
		Description: "Rath run events (rath.events.<run>.<type>); may be lost, Postgres is the truth",
		Subjects:    []string{EventsSubjects},
		Retention:   jetstream.LimitsPolicy,
		Storage:     cfg.Storage,
		Replicas:    cfg.Replicas,
		MaxAge:      cfg.EventsMaxAge,
		// Bounded, the oldest dropped first: events never fill the storage
		// the jobs need (Config.EventsMaxBytes).
		MaxBytes: cfg.EventsMaxBytes,
		Discard:  jetstream.DiscardOld,
		// The server refuses a duplicate window longer than MaxAge.
		Duplicates: min(cfg.DedupeWindow, cfg.EventsMaxAge),
		MaxMsgSize: MaxEventSize + 64<<10,
		// Replays read a run's events with direct gets (Bus.ReplayRun):
		// no consumer, and not through the JetStream API queue.
		AllowDirect: true,
		PersistMode: persist,
	})
	if err != nil {
		return nil, fmt.Errorf("declare stream %s: %w", EventsStream, translate(ctx, err))
	}
	b.workspaces, err = js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      WorkspacesBucket,
		Description: "Rath workspace snapshots, content addressed",
		Storage:     cfg.Storage,
		Replicas:    cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("declare object store %s: %w", WorkspacesBucket, translate(ctx, err))
	}
	return b, nil
}

// eventsPersistMode is the persist mode New declares RATH_EVENTS with.
//
// A single-replica file stream is declared in [jetstream.AsyncPersistMode]:
// the server acknowledges an event once it is in the stream's memory and
// writes what arrived in the last milliseconds with one write(2), where the
// default mode writes every message by itself before acknowledging it
// (events are most of a step's messages). A hard kill of the server can
// lose the events of those milliseconds; the stream is lossy by contract
// (Postgres is the truth, watchers settle from the store), and RATH_JOBS,
// whose messages must survive, keeps the default mode. Replicated streams
// already flush asynchronously behind their Raft log, and memory streams
// do not write, so both keep the default.
//
// The server refuses to change a stream's persist mode, so a stream
// declared before keeps the mode it has.
func eventsPersistMode(ctx context.Context, js jetstream.JetStream, cfg Config) (jetstream.PersistModeType, error) {
	want := jetstream.DefaultPersistMode
	if cfg.Storage == jetstream.FileStorage && cfg.Replicas == 1 {
		want = jetstream.AsyncPersistMode
	}
	s, err := js.Stream(ctx, EventsStream)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return want, nil
	case err != nil:
		return 0, fmt.Errorf("look up stream %s: %w", EventsStream, translate(ctx, err))
	}
	have := s.CachedInfo().Config.PersistMode
	if have == jetstream.AsyncPersistMode && want != have {
		// NATS refuses async mode on more than one replica and refuses
		// to change the mode: say what to do rather than pass on its
		// refusal.
		return 0, fmt.Errorf("%w: stream %s is in async persist mode, which NATS allows only on one replica of file storage (Replicas = %d, Storage = %s asked for) and cannot change in place: delete the stream while nothing runs (nats stream rm %s; its events are a live feed, runs keep their state in the store) and start again",
			ErrInvalidConfig, EventsStream, cfg.Replicas, cfg.Storage, EventsStream)
	}
	return have, nil
}

// bindWait is how long bind waits for the coordinator to declare the
// streams, polling every bindPoll.
const (
	bindWait = time.Minute
	bindPoll = 250 * time.Millisecond
)

// bind looks up what New would declare (Config.Bind), waiting up to
// bindWait for a coordinator that is still starting to declare it.
func (b *Bus) bind(ctx context.Context) (*Bus, error) {
	deadline := time.NewTimer(bindWait)
	defer deadline.Stop()
	tick := time.NewTicker(bindPoll)
	defer tick.Stop()
	for {
		err := b.lookup(ctx)
		if err == nil || !errors.Is(err, jetstream.ErrStreamNotFound) && !errors.Is(err, jetstream.ErrBucketNotFound) {
			if err != nil {
				return nil, err
			}
			return b, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (waiting for it: %w)", err, ctx.Err())
		case <-deadline.C:
			return nil, err
		case <-tick.C:
		}
	}
}

func (b *Bus) lookup(ctx context.Context) error {
	for _, name := range []string{JobsStream, EventsStream} {
		if _, err := b.js.Stream(ctx, name); err != nil {
			return fmt.Errorf("bind stream %s (the coordinator declares it): %w", name, translate(ctx, err))
		}
	}
	var err error
	if b.workspaces, err = b.js.ObjectStore(ctx, WorkspacesBucket); err != nil {
		return fmt.Errorf("bind object store %s (the coordinator declares it): %w", WorkspacesBucket, translate(ctx, err))
	}
	return nil
}

// JetStream returns the JetStream context the bus uses, for what the bus
// does not wrap (stream info, admin).
func (b *Bus) JetStream() jetstream.JetStream { return b.js }

// Workspaces returns the object store of workspace snapshots.
func (b *Bus) Workspaces() jetstream.ObjectStore { return b.workspaces }

// Config returns the effective configuration (defaults applied).
func (b *Bus) Config() Config { return b.cfg }

func (b *Bus) asyncPublishFailed(_ jetstream.JetStream, msg *nats.Msg, err error) {
	// Events are best effort by contract; a lost event is worth a debug
	// line, not an error path.
	b.cfg.Logger.Debug("bus: async publish failed",
		"subject", msg.Subject, "error", err.Error())
}

// FlushEvents waits until every event published so far with
// [Bus.PublishEvent] or [Bus.PublishEvents] has been acknowledged by the
// server (or has failed), and the server has received every event
// published with [Bus.PublishProgress] or [Bus.PublishProgressEvents], or
// until ctx ends. A progress event is stored once
// an event published after it is acknowledged (one connection's publishes
// are stored in order). Call it before closing the connection when the
// last events matter, and in tests.
func (b *Bus) FlushEvents(ctx context.Context) error {
	select {
	case <-b.js.PublishAsyncComplete():
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := b.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("flush events: %w", translate(ctx, err))
	}
	return nil
}

// isContextErr reports whether err is a context cancellation or deadline.
func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// now is the bus clock.
func (b *Bus) now() time.Time { return b.cfg.NowFunc() }
