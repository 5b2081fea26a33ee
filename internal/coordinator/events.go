package coordinator

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rath-run/rath/internal/auth"
	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/api"
)

// Event types the events endpoint adds to a run's own.
const (
	// EventMissing says that some of the run's first events are no longer
	// stored (the events stream keeps them for bus.Config.EventsMaxAge,
	// and publishing them is best effort); the stream still ends with the
	// run's end event.
	EventMissing = api.EventMissing
)

// Timing of the events endpoint.
const (
	// endCheckInterval is how often a live stream that has seen no end
	// event looks at the stored run: an end event lost in transit still
	// ends the stream.
	endCheckInterval = 3 * time.Second
	// endGrace is how long the stream of a run stored as ended waits for
	// the run's end event to reach the events stream (it is published
	// just after the run is stored) before sending one made from the
	// stored run; endPoll is how often it looks meanwhile.
	endGrace = time.Second
	endPoll  = 100 * time.Millisecond
	// endSettled is how long after a run's end its end event is no longer
	// waited for: it was lost or has expired.
	endSettled = 10 * time.Second
)

// runEvents streams a run's events as server-sent events: its stored
// events from its start (or after the Last-Event-ID header, or the after
// query parameter, a stream sequence this endpoint sent as an event's id),
// then its live events, without a gap or a repeat, until the run's end
// event, after which the stream ends. Postgres is the truth and events are
// best effort: when the run is stored as ended but its end event is not in
// the stream (lost, or expired with the rest), the stream ends with an end
// event made from the stored run (no id), and when the run's first events
// are gone it says so first (EventMissing).
//
// What it costs the events stream: the stream of a run that has ended
// creates no JetStream consumer; it replays with direct gets, one request
// per event and nothing held between them (bus.Bus.ReplayRun). A live
// run's stream holds one ordered consumer while it lasts, deleted when it
// ends; the live streams of a token and of a tenant are capped
// (Config.EventStreamsPerToken and EventStreamsPerTenant; past either, 429
// with Retry-After), so that no tenant can fill the events stream's
// consumer limit for the others.
func (c *Coordinator) runEvents(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	run, err := c.runsOf(ctx).Get(ctx, id)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	after, err := lastEventID(r)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "internal", "streaming unsupported")
		return
	}
	s := &eventStream{w: w, flusher: flusher, rc: http.NewResponseController(w), after: after, fromStart: after == 0}
	start := func() {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		flusher.Flush()
	}
	if run.Status.Terminal() {
		start()
		c.finishEvents(ctx, s, run)
		return
	}
	p, _ := auth.PrincipalFrom(ctx)
	release, err := c.streams.acquire(cmp.Or(p.Tenant, auth.DefaultTenant), p.TokenID)
	if err != nil {
		tooManyStreams(w, err)
		return
	}
	defer release()
	// The stream outlives the server's write timeout: only the client's
	// leaving, the run's end or a write stalled for streamWriteWindow
	// (send) ends it.
	holdConn(w, 0)
	// Ending the watch deletes its consumer (bus.Bus.WatchRunAfter).
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, failed, err := c.bus.WatchRunAfter(wctx, id, after)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	start()
	tick := time.NewTicker(endCheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-events:
			if !ok {
				if ctx.Err() == nil {
					c.log.WarnContext(ctx, "run events: watch ended", "run", id, "error", failed())
				}
				return
			}
			if !s.send(e) {
				return
			}
			if endsRun(e.Type) || (e.Type == "run.waiting" || e.Type == api.EventRunNeedsReview) && !c.resumedSince(ctx, e.Event) {
				return
			}
		case <-tick.C:
			// The end event may have been lost: ask the stored run.
			run, err := c.runsOf(ctx).Get(ctx, id)
			// (Not a waiting run: its stream ends at run.waiting, and a
			// stream resumed past that waits for the run to go on.)
			if err != nil || !run.Status.Terminal() {
				continue
			}
			// Stop following (which deletes the consumer) and finish
			// from what is stored, after the last event sent.
			cancel()
			c.finishEvents(ctx, s, run)
			return
		}
	}
}

// finishEvents ends the stream of a run stored as ended: it replays the
// run's stored events after the last one sent, waits up to endGrace for the
// end event when the run ended within endSettled, and sends one made from
// run when none came.
func (c *Coordinator) finishEvents(ctx context.Context, s *eventStream, run runs.Run) {
	var deadline <-chan time.Time
	var poll *time.Ticker
	for {
		_, err := c.bus.ReplayRun(ctx, run.ID, s.after, func(e bus.StoredEvent) error {
			if !s.send(e) {
				return errStreamGone
			}
			if endsRun(e.Type) {
				return errRunEnded // the stream ends after the end event
			}
			return nil
		})
		switch {
		case errors.Is(err, errRunEnded), errors.Is(err, errStreamGone), ctx.Err() != nil:
			return
		case err != nil:
			c.log.WarnContext(ctx, "run events: replay", "run", run.ID, "error", err.Error())
			s.send(bus.StoredEvent{Event: storedEnd(run)})
			return
		}
		if deadline == nil {
			if time.Since(run.UpdatedAt) > endSettled {
				// Long ended: its end event is not on its way.
				s.send(bus.StoredEvent{Event: storedEnd(run)})
				return
			}
			deadline = time.After(endGrace)
			poll = time.NewTicker(endPoll)
			defer poll.Stop()
		}
		select {
		case <-ctx.Done():
			return
		case <-deadline:
			s.send(bus.StoredEvent{Event: storedEnd(run)})
			return
		case <-poll.C:
		}
	}
}

// storedEnd is the end event of a run made from the stored run, timed when
// the run was last updated (its end).
func storedEnd(run runs.Run) bus.Event {
	e := runEndEvent(run)
	e.Time = run.UpdatedAt.UTC()
	return e
}

// Errors that end a replay: the client has gone, or the run's end event
// was sent.
var (
	errStreamGone = errors.New("event stream closed")
	errRunEnded   = errors.New("run ended")
)

// endsRun reports whether an event of type typ is a run's end: run.completed,
// run.failed, run.canceled, run.timed_out.
func endsRun(typ string) bool { return api.EndsRun(typ) }

// lastEventID reads where a stream resumes: the Last-Event-ID header (an
// EventSource reconnecting sends it) or the after query parameter, a
// stream sequence; 0 when neither is given.
func lastEventID(r *http.Request) (uint64, error) {
	name, v := "Last-Event-ID", r.Header.Get("Last-Event-ID")
	if q := r.URL.Query().Get("after"); q != "" {
		name, v = "after", q
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, badRequest("%s: %q is not an event id (a stream sequence number this endpoint sent as id)", name, v)
	}
	return n, nil
}

// eventStream writes server-sent events: each stored event after the last
// message sent, the last event of a message (bus.StoredEvent.Last) with
// the message's stream sequence as id, the events before it in a batch
// without one (a client resumes after a message, never inside one); an
// event made here (no sequence) without an id.
type eventStream struct {
	w       http.ResponseWriter
	flusher http.Flusher
	rc      *http.ResponseController

	after     uint64 // the sequence of the last stored message sent whole
	fromStart bool   // the stream replays from the run's start
	sent      int    // events sent
}

// send writes e and reports whether the client is still there. A stored
// event of a message at or before the last one sent whole is skipped
// (true). The events of a batch go out with one flush, after its last.
// The first event of a stream from the run's start that is not
// run.submitted is preceded by an EventMissing notice.
func (s *eventStream) send(e bus.StoredEvent) bool {
	if e.Seq != 0 && e.Seq <= s.after {
		return true
	}
	if s.fromStart && s.sent == 0 && e.Type != "run.submitted" {
		if !s.write(bus.StoredEvent{Event: bus.Event{RunID: e.RunID, Type: EventMissing, Time: time.Now().UTC(),
			Data: mustJSON(api.EventsMissingData{Message: "the run's first events are no longer stored (the events stream keeps them for a limited time); the stream still ends with the run's end"})}}) {
			return false
		}
	}
	if !s.write(e) {
		return false
	}
	if e.Seq != 0 && e.Last {
		s.after = e.Seq
	}
	return true
}

// write writes e, with its message's sequence as id when it is the
// message's last event, and flushes unless more of its batch follows.
func (s *eventStream) write(e bus.StoredEvent) bool {
	b, err := json.Marshal(api.Event{RunID: e.RunID, StepID: e.StepID, Type: e.Type, Time: e.Time, Data: e.Data})
	if err != nil {
		return false
	}
	stored := e.Seq != 0
	id := ""
	if stored && e.Last {
		id = "id: " + strconv.FormatUint(e.Seq, 10) + "\n"
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(streamWriteWindow))
	if _, err := fmt.Fprintf(s.w, "%sevent: %s\ndata: %s\n\n", id, e.Type, b); err != nil {
		return false
	}
	if !stored || e.Last {
		s.flusher.Flush()
	}
	s.sent++
	return true
}
