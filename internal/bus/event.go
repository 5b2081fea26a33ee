package bus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"
)

// Event types the runtime emits. The list is open: any type matching
// [a-z._]+ (dot-separated, non-empty parts) may be published.
const (
	EventStepStarted   = "step.started"
	EventStepToken     = "step.token"
	EventStepToolCall  = "step.tool_call"
	EventStepCommitted = "step.committed"
	EventStepFailed    = "step.failed"
	EventRunCompleted  = "run.completed"
	EventRunFailed     = "run.failed"
	EventRunCanceled   = "run.canceled"
)

// Limits of events.
const (
	// MaxEventSize is the largest encoded Event PublishEvent accepts.
	MaxEventSize = 1 << 20
	// MaxEventTypeLen is the longest event type.
	MaxEventTypeLen = 64
)

// Event is one thing that happened in a run, published on
// rath.events.<run>.<type>. Events are for watching a run live; they may be
// lost or repeated, and Postgres remains the record.
type Event struct {
	RunID  string          `json:"run_id"`
	StepID string          `json:"step_id,omitempty"`
	Type   string          `json:"type"`
	Time   time.Time       `json:"time"`
	Data   json.RawMessage `json:"data,omitempty"`
}

// EventSubject returns the subject of an event: rath.events.<run>.<type>.
func EventSubject(runID, typ string) string { return "rath.events." + runID + "." + typ }

func isEventTypeByte(c byte) bool { return 'a' <= c && c <= 'z' || c == '_' || c == '.' }

func validEventType(typ string) error {
	if typ == "" || len(typ) > MaxEventTypeLen {
		return fmt.Errorf("type %q: want 1..%d bytes of [a-z._]", typ, MaxEventTypeLen)
	}
	prev := byte('.')
	for i := range len(typ) {
		c := typ[i]
		if !isEventTypeByte(c) {
			return fmt.Errorf("type %q: byte %d (%q) is not in [a-z._]", typ, i, c)
		}
		if c == '.' && prev == '.' {
			return fmt.Errorf("type %q: empty part at byte %d", typ, i)
		}
		prev = c
	}
	if prev == '.' {
		return fmt.Errorf("type %q: ends with '.'", typ)
	}
	return nil
}

// PublishEvent publishes e on rath.events.<run>.<type> without waiting for
// the server (events are best effort; failures are logged at debug level).
// A zero Time is set to now. It returns ErrInvalidEvent (naming the field),
// ErrTooLarge, or an error when the client's buffer of unacknowledged
// publishes stays full. [Bus.FlushEvents] waits for outstanding events.
func (b *Bus) PublishEvent(ctx context.Context, e Event) error {
	subj, data, err := b.encodeEvent(ctx, e)
	if err != nil {
		return err
	}
	if _, err := b.js.PublishAsync(subj, data); err != nil {
		return fmt.Errorf("publish event %s/%s: %w", e.RunID, e.Type, translate(ctx, err))
	}
	return nil
}

// PublishProgress publishes e like [Bus.PublishEvent] (same validation,
// subject and stream) but asks the server for no acknowledgement: the
// server stores it without sending a PubAck back, so the event costs
// neither an ack message on the connection nor the client's bookkeeping of
// a pending publish. It is for the events inside a step (started, tokens,
// the model's reply) that a later acknowledged event of the same run
// follows: the stream stores one connection's publishes in the order they
// were sent, so once a later event from the same bus is acknowledged
// ([Bus.FlushEvents]), this one has been stored before it (or was lost:
// with no acknowledgement, a failure to store it is not reported at all).
// Watchers see the same events in the same order either way.
func (b *Bus) PublishProgress(ctx context.Context, e Event) error {
	subj, data, err := b.encodeEvent(ctx, e)
	if err != nil {
		return err
	}
	if err := b.nc.Publish(subj, data); err != nil {
		return fmt.Errorf("publish event %s/%s: %w", e.RunID, e.Type, translate(ctx, err))
	}
	return nil
}

// encodeEvent validates e, stamps a zero Time with now, and returns its
// subject and encoding.
func (b *Bus) encodeEvent(ctx context.Context, e Event) (string, []byte, error) {
	if err := ctx.Err(); err != nil {
		return "", nil, err
	}
	if err := validRunID(e.RunID); err != nil {
		return "", nil, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	if err := validEventType(e.Type); err != nil {
		return "", nil, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	if e.Time.IsZero() {
		e.Time = b.now().UTC()
	}
	data, err := appendEvent(make([]byte, 0, 128+len(e.StepID)+len(e.Data)), e)
	if err != nil {
		return "", nil, err
	}
	if len(data) > MaxEventSize {
		return "", nil, fmt.Errorf("%w: event %s is %d bytes encoded, limit %d", ErrTooLarge, e.Type, len(data), MaxEventSize)
	}
	return EventSubject(e.RunID, e.Type), data, nil
}

// WatchRun streams the events of one run from the beginning of the stream
// (an ordered consumer over rath.events.<run>.>, DeliverAll), in the order
// they were stored, and then live until ctx ends. The channel is closed when
// ctx ends or the watch fails, and the watch's consumer is then deleted; after it closes, the returned function
// reports the failure (nil when ctx ended it). Events whose payload cannot
// be decoded are skipped (logged at debug level).
func (b *Bus) WatchRun(ctx context.Context, runID string) (<-chan Event, func() error, error) {
	if err := validRunID(runID); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	return plain(b.watch(ctx, 0, "rath.events."+runID+".>"))
}

// dropConsumer deletes a finished watch's consumer at once rather than
// leaving it to the server's inactivity threshold: watches come and go
// with API clients, and every consumer counts against the events stream's
// consumer limit, which all tenants share.
func (b *Bus) dropConsumer(ctx context.Context, cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := b.js.DeleteConsumer(ctx, EventsStream, info.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		b.cfg.Logger.DebugContext(ctx, "bus: watch consumer not deleted; the server drops it when inactive", "consumer", info.Name, "error", err.Error())
	}
}

// watch streams the events on the filter subjects stored after stream
// sequence after (0: from the start).
func (b *Bus) watch(ctx context.Context, after uint64, filters ...string) (<-chan StoredEvent, func() error, error) {
	filter := strings.Join(filters, ",")
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: filters, DeliverPolicy: jetstream.DeliverAllPolicy}
	if after > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, after+1
	}
	cons, err := b.js.OrderedConsumer(ctx, EventsStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: cfg.FilterSubjects,
		DeliverPolicy:  cfg.DeliverPolicy,
		OptStartSeq:    cfg.OptStartSeq,
		// Ordered consumers are not deleted on Stop: dropConsumer deletes
		// a finished watch's consumer, and the server drops one whose
		// process died soon (the default is 5m). A live watch keeps
		// pulling, and one the server dropped while its reader stalled is
		// recreated from where it stopped.
		InactiveThreshold: 30 * time.Second,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("watch %s: %w", filter, translate(ctx, err))
	}
	it, err := cons.Messages()
	if err != nil {
		b.dropConsumer(ctx, cons)
		return nil, nil, fmt.Errorf("watch %s: %w", filter, translate(ctx, err))
	}
	ch := make(chan StoredEvent, 64)
	var (
		mu      sync.Mutex
		failure error // guarded by mu; set before ch is closed
	)
	go func() {
		// The channel closes last: a reader that has seen it closed
		// knows the watch's consumer is gone and this goroutine done
		// (the coordinator's event feed stops without leaving it behind).
		defer close(ch)
		defer b.dropConsumer(ctx, cons)
		defer it.Stop()
		for {
			m, err := it.Next(jetstream.NextContext(ctx))
			if err != nil {
				if ctx.Err() != nil && isContextErr(err) {
					return
				}
				if errors.Is(err, jetstream.ErrMsgIteratorClosed) && ctx.Err() != nil {
					return
				}
				mu.Lock()
				failure = fmt.Errorf("watch %s: %w", filter, translate(ctx, err))
				mu.Unlock()
				return
			}
			var e Event
			if err := json.Unmarshal(m.Data(), &e); err != nil {
				b.cfg.Logger.DebugContext(ctx, "bus: undecodable event skipped", "subject", m.Subject(), "error", err.Error())
				continue
			}
			var seq uint64
			if md, err := m.Metadata(); err == nil {
				seq = md.Sequence.Stream
			}
			select {
			case ch <- StoredEvent{Seq: seq, Event: e}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, func() error {
		mu.Lock()
		defer mu.Unlock()
		return failure
	}, nil
}

// appendEvent appends e's JSON encoding (the one json.Marshal gives, but
// for HTML escaping, which it does not need) without reflection: a step
// publishes several events, and json.Marshal with a RawMessage scanned
// the data twice (issue 25). e.RunID and e.Type have been validated
// (plain ASCII); the step id and the data are checked here.
func appendEvent(buf []byte, e Event) ([]byte, error) {
	buf = append(buf, `{"run_id":"`...)
	buf = append(buf, e.RunID...)
	buf = append(buf, '"')
	if e.StepID != "" {
		buf = append(buf, `,"step_id":`...)
		buf = appendJSONString(buf, e.StepID)
	}
	buf = append(buf, `,"type":"`...)
	buf = append(buf, e.Type...)
	buf = append(buf, `","time":`...)
	t, err := e.Time.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("%w: time: %w", ErrInvalidEvent, err)
	}
	buf = append(buf, t...)
	if len(e.Data) > 0 {
		buf = append(buf, `,"data":`...)
		w := bytes.NewBuffer(buf)
		if err := json.Compact(w, e.Data); err != nil {
			return nil, fmt.Errorf("%w: data is not valid JSON", ErrInvalidEvent)
		}
		buf = w.Bytes()
	}
	return append(buf, '}'), nil
}

// appendJSONString appends s as a JSON string: as it is when it needs no
// escaping, else as json.Marshal writes it.
func appendJSONString(buf []byte, s string) []byte {
	plain := utf8.ValidString(s)
	for i := 0; plain && i < len(s); i++ {
		c := s[i]
		plain = c >= 0x20 && c != '"' && c != '\\' && c != 0x7f
	}
	if plain && !strings.ContainsAny(s, "\u2028\u2029") {
		buf = append(buf, '"')
		buf = append(buf, s...)
		return append(buf, '"')
	}
	q, _ := json.Marshal(s) // a string always encodes
	return append(buf, q...)
}
