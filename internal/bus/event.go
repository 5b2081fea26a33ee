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
	return b.publishEvents(ctx, []Event{e}, true)
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
	return b.publishEvents(ctx, []Event{e}, false)
}

// PublishEvents publishes es, events of one run, in order, as one message
// of the events stream (a batch): stored once, with one stream sequence,
// on the subject of its last event, so a step whose events all come
// within moments (started, the model's reply, committed, the run's end)
// costs the server one message instead of one an event. Readers see each
// event as if published alone, in the same order: [Bus.WatchRun],
// [Bus.WatchRunAfter], [Bus.ReplayRun] and [Bus.SubscribeEvents] unpack a
// batch (the last of which carries [StoredEvent.Last]), and
// [DecodeEvents] does for other readers. Events that together pass
// MaxEventSize go in as many messages as it takes, in order, each on its
// last event's subject. Like PublishEvent it asks for the server's
// acknowledgement (of the last message) without waiting for it. An event
// that is invalid or too large by itself is left out and its error
// returned (the others are published); events of different runs are
// refused, none published.
func (b *Bus) PublishEvents(ctx context.Context, es []Event) error {
	return b.publishEvents(ctx, es, true)
}

// PublishProgressEvents is [Bus.PublishEvents] asking for no
// acknowledgement, like [Bus.PublishProgress].
func (b *Bus) PublishProgressEvents(ctx context.Context, es []Event) error {
	return b.publishEvents(ctx, es, false)
}

// publishEvents encodes es into messages of at most MaxEventSize (one
// event's message is its encoding; several events' a JSON array of
// theirs) and publishes them, asking for the acknowledgement of the last
// when ack.
func (b *Bus) publishEvents(ctx context.Context, es []Event, ack bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var errs []error
	type message struct {
		subj string
		evs  [][]byte
		size int // encoded as a batch: brackets and commas included
	}
	var msgs []message
	for i, e := range es {
		if e.RunID != es[0].RunID {
			return fmt.Errorf("%w: events %d and 0 are of different runs (%q, %q): a batch is one run's", ErrInvalidEvent, i, e.RunID, es[0].RunID)
		}
		subj, data, err := b.encodeEvent(ctx, e)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if n := len(msgs); n > 0 && msgs[n-1].size+1+len(data) <= MaxEventSize {
			m := &msgs[n-1]
			m.subj, m.evs, m.size = subj, append(m.evs, data), m.size+1+len(data)
			continue
		}
		msgs = append(msgs, message{subj: subj, evs: [][]byte{data}, size: 2 + len(data)})
	}
	for i, m := range msgs {
		data := m.evs[0]
		if len(m.evs) > 1 {
			data = make([]byte, 0, m.size)
			data = append(data, '[')
			for j, ev := range m.evs {
				if j > 0 {
					data = append(data, ',')
				}
				data = append(data, ev...)
			}
			data = append(data, ']')
		}
		var err error
		if ack && i == len(msgs)-1 {
			_, err = b.js.PublishAsync(m.subj, data)
		} else {
			err = b.nc.Publish(m.subj, data)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("publish events on %s: %w", m.subj, translate(ctx, err)))
		}
	}
	return errors.Join(errs...)
}

// DecodeEvents decodes a message of the events stream that arrived on
// subject: one event (a JSON object), or a batch of one run's events
// ([Bus.PublishEvents]: a JSON array of them, on the subject of its
// last). A batch must name the subject's run in every event and end with
// an event of the subject's type. Readers of the stream other than this
// package's (a core NATS subscription of the events' subjects) use it to
// see every event a message carries.
func DecodeEvents(subject string, data []byte) ([]Event, error) {
	if !isBatch(data) {
		var e Event
		if err := json.Unmarshal(data, &e); err != nil {
			return nil, fmt.Errorf("event on %s: %w", subject, err)
		}
		return []Event{e}, nil
	}
	le, err := liveEvent(subject, nil)
	if err != nil {
		return nil, err
	}
	return decodeBatch(le, subject, data)
}

// decodeBatch decodes data, a batch that arrived on subject, whose run and
// type le holds (read from subject).
func decodeBatch(le LiveEvent, subject string, data []byte) ([]Event, error) {
	var es []Event
	if err := json.Unmarshal(data, &es); err != nil {
		return nil, fmt.Errorf("events on %s: %w", subject, err)
	}
	if len(es) == 0 {
		return nil, fmt.Errorf("events on %s: an empty batch", subject)
	}
	for i, e := range es {
		if e.RunID != le.RunID {
			return nil, fmt.Errorf("events on %s: event %d is of run %q, not the subject's", subject, i, e.RunID)
		}
	}
	if last := es[len(es)-1].Type; last != le.Type {
		return nil, fmt.Errorf("events on %s: the batch ends with %q, not the subject's type", subject, last)
	}
	return es, nil
}

// isBatch reports whether an events stream message holds a batch (a JSON
// array) rather than one event.
func isBatch(data []byte) bool {
	data = bytes.TrimLeft(data, " \t\r\n")
	return len(data) > 0 && data[0] == '['
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
			es, err := DecodeEvents(m.Subject(), m.Data())
			if err != nil {
				b.cfg.Logger.DebugContext(ctx, "bus: undecodable event skipped", "subject", m.Subject(), "error", err.Error())
				continue
			}
			var seq uint64
			if md, err := m.Metadata(); err == nil {
				seq = md.Sequence.Stream
			}
			for i, e := range es {
				select {
				case ch <- StoredEvent{Seq: seq, Last: i == len(es)-1, Event: e}:
				case <-ctx.Done():
					return
				}
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
