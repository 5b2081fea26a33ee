package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/google/uuid"

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
// Watch. Every complete "data: " line is one event, delivered in order
// with the fields encoding/json gives it; other lines are skipped; the
// first data line that is not an event ends Watch with a "bad event" error
// naming the run, after the events before it.
func FuzzWatch(f *testing.F) {
	f.Add([]byte("data: {\"run_id\":\"run_a\",\"type\":\"run.queued\",\"time\":\"2026-01-01T00:00:00Z\"}\n\n" +
		"data: {\"run_id\":\"run_a\",\"step_id\":\"s\",\"type\":\"run.succeeded\",\"time\":\"2026-01-01T00:00:01Z\",\"data\":{\"x\":1}}\r\n\r\n"))
	f.Add([]byte(": keepalive\n\nevent: x\ndata: {\"type\":\"t\"}\n"))
	f.Add([]byte("data: {\"type\":\n"))
	f.Add([]byte("data: {\"time\":\"yesterday\"}\n"))
	f.Add([]byte("data: {\"type\":\"t\"}"))  // no final newline
	f.Add([]byte("data:{\"type\":\"t\"}\n")) // no space
	f.Add([]byte("data: null\ndata: []\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		c := cannedClient(t, 200, body)
		var got []Event
		err := c.Watch(context.Background(), "run_a", func(e Event) error {
			got = append(got, e)
			return nil
		})
		var want []Event
		var wantErr bool
		lines := strings.SplitAfter(string(body), "\n")
		for _, l := range lines {
			if !strings.HasSuffix(l, "\n") {
				break // an unterminated last line is not read
			}
			data, ok := strings.CutPrefix(strings.TrimRight(l, "\r\n"), "data: ")
			if !ok {
				continue
			}
			var e Event
			if json.Unmarshal([]byte(data), &e) != nil {
				wantErr = true
				break
			}
			want = append(want, e)
		}
		if wantErr != (err != nil) {
			t.Fatalf("Watch: %v; want error %v", err, wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), "watch run_a: bad event") {
			t.Fatalf("error %q does not name the run and the event", err)
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
