package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/session"
)

// canned is an http.RoundTripper that answers every request with one
// status and body, so the fuzzers drive the client's decoding of replies
// without a network.
type canned struct {
	status int
	body   []byte
}

func (c canned) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: c.status,
		Header:     http.Header{"Content-Type": {"application/json"}},
		Body:       io.NopCloser(bytes.NewReader(c.body)),
		Request:    r,
	}, nil
}

func cannedClient(t *testing.T, status int, body []byte) *Client {
	t.Helper()
	c, err := New("http://coordinator.invalid", "tok")
	if err != nil {
		t.Fatal(err)
	}
	c.http = &http.Client{Transport: canned{status, body}}
	return c
}

// FuzzDo: whatever a server answers, Do never panics. A status of 300 or
// more is an *APIError carrying that status, with the reply's
// {"error":{"code","message"}} when it has a message and otherwise code
// "http" and the body's text; errors.Is(err, ErrNotFound) exactly for 404.
// A 2xx reply decodes into out exactly as encoding/json decodes it, or
// fails naming the request and "decode reply".
func FuzzDo(f *testing.F) {
	for _, s := range []struct {
		status int
		body   string
	}{
		{200, `{"id":"run_a","status":"queued"}`},
		{200, `{"id":`},
		{200, ``},
		{200, `[1,2]`},
		{201, `{"a":1} trailing`},
		{204, ``},
		{400, `{"error":{"code":"invalid_argument","message":"queue: bad"}}`},
		{404, `{"error":{"code":"not_found","message":"run run_x"}}`},
		{404, `not found`},
		{413, `{"error":{"code":"too_large","message":""}}`},
		{500, "  upstream \n"},
		{502, `{"error":"string"}`},
		{302, ``},
	} {
		f.Add(s.status, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		if status < 100 || status > 999 {
			status = 200 + (status%800+800)%800
		}
		c := cannedClient(t, status, body)
		var out any
		err := c.Do(context.Background(), http.MethodGet, "/v1/runs/x", nil, &out)
		if status >= 300 {
			var ae *APIError
			if !errors.As(err, &ae) {
				t.Fatalf("status %d: err %v is not an *APIError", status, err)
			}
			if ae.Status != status {
				t.Fatalf("APIError.Status = %d, want %d", ae.Status, status)
			}
			if errors.Is(err, ErrNotFound) != (status == http.StatusNotFound) {
				t.Fatalf("status %d: errors.Is(ErrNotFound) = %v", status, status != http.StatusNotFound)
			}
			var e struct {
				Error APIError `json:"error"`
			}
			if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
				if ae.Message != e.Error.Message || ae.Code != e.Error.Code {
					t.Fatalf("APIError %+v, reply said %+v", ae, e.Error)
				}
			} else if ae.Code != "http" || ae.Message != strings.TrimSpace(string(body)) {
				t.Fatalf("APIError %+v for a reply that is not an error object: %q", ae, body)
			}
			if out != nil {
				t.Fatalf("an error reply filled out: %v", out)
			}
			return
		}
		var want any
		werr := json.NewDecoder(bytes.NewReader(body)).Decode(&want)
		if (err == nil) != (werr == nil) {
			t.Fatalf("Do: %v; encoding/json: %v", err, werr)
		}
		if err != nil {
			if !strings.Contains(err.Error(), "GET /v1/runs/x: decode reply") {
				t.Fatalf("error %q does not name the request", err)
			}
			return
		}
		if !reflect.DeepEqual(out, want) {
			t.Fatalf("decoded %#v, want %#v", out, want)
		}
	})
}

// FuzzWatch: a run's event stream (server-sent events) never panics
// WatchRun. Lines are "id:", "data:" (one optional space after the colon;
// several are joined by newlines) and others, which are skipped; a blank
// line dispatches the event its data lines hold (none when they hold
// nothing), with the id before it.
// Events are delivered in order with the fields encoding/json gives them,
// skipping any whose id is not past the last id delivered; the run's end
// event ends the watch without error. A data that is not an event, or an
// id that is not a number, ends it with a "bad event" error naming the
// run, after the events before it; so does a stream that ends before the
// run's end (without reconnects: "ended before the run's end").
func FuzzWatch(f *testing.F) {
	f.Add([]byte("data: {\"run_id\":\"run_a\",\"type\":\"run.submitted\",\"time\":\"2026-01-01T00:00:00Z\"}\n\n" +
		"id: 7\r\ndata: {\"run_id\":\"run_a\",\"step_id\":\"s\",\"type\":\"run.completed\",\"time\":\"2026-01-01T00:00:01Z\",\"data\":{\"x\":1}}\r\n\r\n"))
	f.Add([]byte(": keepalive\n\nevent: x\ndata: {\"type\":\"t\"}\n"))
	f.Add([]byte("data: {\"type\":\n\n"))
	f.Add([]byte("data: {\"time\":\"yesterday\"}\n\n"))
	f.Add([]byte("data: {\"type\":\"run.failed\"}")) // no final newline
	f.Add([]byte("data:{\"type\":\"t\"}\n\n"))       // no space
	f.Add([]byte("data: null\ndata: []\n\n"))
	f.Add([]byte("id: 3\ndata: {\"type\":\"a\"}\n\nid: 3\ndata: {\"type\":\"a\"}\n\nid: x\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		c := cannedClient(t, 200, body)
		var got []api.Event
		err := c.WatchRun(context.Background(), "run_a", WatchOptions{Reconnects: -1}, func(e api.Event) error {
			got = append(got, e)
			return nil
		})
		var want []api.Event
		wantErr, ended := "", false
		lines := strings.Split(string(body), "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1] // the newline ended the last line
		}
		var (
			id, after uint64
			data      []string
		)
	read:
		for _, l := range lines {
			l = strings.TrimSuffix(l, "\r")
			switch {
			case l == "":
				raw := strings.Join(data, "\n")
				if raw == "" {
					data = nil // no data: no event
					continue
				}
				var e api.Event
				if json.Unmarshal([]byte(raw), &e) != nil {
					wantErr = "watch run_a: bad event"
					break read
				}
				e.ID, id, data = id, 0, nil
				if e.ID != 0 && e.ID <= after {
					continue
				}
				want = append(want, e)
				after = max(after, e.ID)
				if e.EndsRun() {
					ended = true
					break read
				}
			case strings.HasPrefix(l, "id:"):
				n, perr := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(l, "id:")), 10, 64)
				if perr != nil {
					wantErr = "watch run_a: bad event id"
					break read
				}
				id = n
			case strings.HasPrefix(l, "data:"):
				data = append(data, strings.TrimPrefix(strings.TrimPrefix(l, "data:"), " "))
			}
		}
		if wantErr == "" && !ended {
			wantErr = "watch run_a: the stream ended before the run's end"
		}
		if (wantErr != "") != (err != nil) {
			t.Fatalf("WatchRun: %v; want error %q", err, wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error %q, want one containing %q", err, wantErr)
		}
		if len(got) != len(want) {
			t.Fatalf("%d events delivered, want %d", len(got), len(want))
		}
		for i := range want {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Fatalf("event %d: %+v, want %+v", i, got[i], want[i])
			}
		}
	})
}

// FuzzGraphGet: the remote session graph (rathctl replay and rerun build
// on it) decodes versions from the coordinator. Whatever the reply, Get
// never panics and returns either an error or the version asked for:
// never one with another id, which it would then serve from its cache.
func FuzzGraphGet(f *testing.F) {
	id := "0199a3a4-7d5c-7000-8000-000000000000"
	f.Add(200, []byte(`{"id":"`+id+`","op":"create","len":0,"hash":"ab"}`))
	f.Add(200, []byte(`{"id":"0199a3a4-7d5c-7000-8000-000000000001","op":"create"}`))
	f.Add(200, []byte(`{}`))
	f.Add(200, []byte(`{"id":"nope"}`))
	f.Add(404, []byte(`{"error":{"code":"not_found","message":"version"}}`))
	f.Add(200, []byte(`null`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		if status < 100 || status > 999 {
			status = 200
		}
		want := uuid.MustParse(id)
		g := cannedClient(t, status, body).Graph()
		for range 2 { // both Gets ask the coordinator
			v, err := g.Get(context.Background(), want)
			if err != nil {
				if status == http.StatusNotFound && !errors.Is(err, session.ErrNotFound) {
					t.Fatalf("a 404 is %v, not session.ErrNotFound", err)
				}
				continue
			}
			if v == nil || v.ID != want {
				t.Fatalf("Get(%s) returned version %v", want, v)
			}
		}
	})
}
