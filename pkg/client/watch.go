package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rath-run/rath/pkg/api"
)

// WatchOptions tune [Client.WatchRun].
type WatchOptions struct {
	// After resumes after the event with this ID (0: from the run's start).
	After uint64
	// Reconnects is how many times a stream cut before the run's end (or
	// waiting) is reopened after the last event received; 0 means 5, and a
	// negative value none.
	Reconnects int
}

// maxEventLine bounds one line of the stream (an event is at most 1 MiB
// encoded on the server).
const maxEventLine = 2 << 20

// Watch streams a run's events from its start and calls fn for each until
// the run's end or waiting event, ctx ends, or fn returns an error. It is
// WatchRun with default options.
func (c *Client) Watch(ctx context.Context, runID string, fn func(api.Event) error) error {
	return c.WatchRun(ctx, runID, WatchOptions{}, fn)
}

// WatchRun streams a run's events (GET /v1/runs/{id}/events): the events
// stored so far from the run's start (or after opts.After), then live ones,
// each once and in order, and calls fn for each. It returns nil after the
// run's end event (the stream then ends), or after run.waiting when the
// server ends the stream there (the run waits for a decision); an error from
// fn, ctx's, or the request's. A stream cut before either is reopened
// after the last event received (Last-Event-ID), up to opts.Reconnects
// times; fn does not see an event twice.
func (c *Client) WatchRun(ctx context.Context, runID string, opts WatchOptions, fn func(api.Event) error) error {
	if runID == "" {
		return fmt.Errorf("watch: run id is empty")
	}
	reconnects := opts.Reconnects
	if reconnects == 0 {
		reconnects = 5
	}
	at := watchCursor{after: opts.After}
	for attempt := 0; ; attempt++ {
		var ended bool
		var err error
		at, ended, err = c.watchOnce(ctx, runID, at, fn)
		if ended || ctx.Err() != nil {
			if ended {
				return nil
			}
			return ctx.Err()
		}
		var apiErr *APIError
		if errors.As(err, &apiErr) || errors.Is(err, errFn) || attempt >= reconnects {
			if err == nil {
				return fmt.Errorf("watch %s: the stream ended before the run's end (%d reconnects)", runID, attempt)
			}
			return unwrapFn(err)
		}
		// Reopen after a short pause that grows with each attempt.
		t := time.NewTimer(time.Duration(attempt+1) * 200 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// errFn marks an error returned by the caller's fn.
var errFn = errors.New("watch callback")

type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }
func (e fnError) Is(t error) bool {
	return t == errFn
}
func unwrapFn(err error) error {
	var f fnError
	if errors.As(err, &f) {
		return f.err
	}
	return err
}

// watchCursor is where a watch stands: after the event with id after, and
// past the first held events without an id that came after it. The server
// sends the events of a batch (a step's events stored as one message) with
// an id on the last only, and a stream reopened after an id starts again
// with the batch's first event: the reopened stream's first held events
// are the ones already passed to fn.
type watchCursor struct {
	after uint64
	held  int
}

// watchOnce reads one stream from at. It returns where it stopped (the
// last event passed to fn), whether the stream ended as the run's stream
// ends (after its end event, or after run.waiting), and why else it
// stopped (nil: the server closed the stream early).
func (c *Client) watchOnce(ctx context.Context, runID string, at watchCursor, fn func(api.Event) error) (watchCursor, bool, error) {
	after := at.after
	path := "/v1/runs/" + url.PathEscape(runID) + "/events"
	if after > 0 {
		path += "?after=" + strconv.FormatUint(after, 10)
	}
	resp, err := c.send(ctx, http.MethodGet, path, nil)
	if err != nil {
		return at, false, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxEventLine)
	var (
		id       uint64
		data     strings.Builder
		lastType string
		skip     = at.held // held events the reopened stream sends again
	)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data.Len() == 0 {
				continue
			}
			var e api.Event
			if err := json.Unmarshal([]byte(data.String()), &e); err != nil {
				return at, false, fnError{fmt.Errorf("watch %s: bad event: %w", runID, err)}
			}
			e.ID = id
			data.Reset()
			id = 0
			switch {
			case e.ID != 0 && e.ID <= at.after:
				continue
			case e.ID == 0 && skip > 0:
				// Passed to fn before the stream was cut inside its batch.
				skip--
				continue
			}
			if err := fn(e); err != nil {
				return at, false, fnError{err}
			}
			if e.ID != 0 {
				at = watchCursor{after: e.ID}
			} else {
				at.held++
			}
			skip = 0
			lastType = e.Type
			if e.EndsRun() {
				return at, true, nil
			}
		case strings.HasPrefix(line, "id:"):
			v := strings.TrimSpace(strings.TrimPrefix(line, "id:"))
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return at, false, fnError{fmt.Errorf("watch %s: bad event id %q", runID, v)}
			}
			id = n
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		return at, false, fmt.Errorf("watch %s: %w", runID, err)
	}
	// The server ends a waiting run's stream after run.waiting (or
	// run.needs_review).
	return at, lastType == api.EventRunWaiting || lastType == api.EventRunNeedsReview, nil
}
