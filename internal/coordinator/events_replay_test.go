package coordinator_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rath-run/rath/internal/auth"
	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/client"
)

// sse is one server-sent event as the events endpoint wrote it.
type sse struct {
	id   uint64 // 0: no id line
	typ  string
	note string // data.note of a probe event
}

// openSSE opens a run's event stream with lastID as Last-Event-ID (none
// when 0) and returns the response; the caller closes its body.
func openSSE(ctx context.Context, t *testing.T, s *authStack, token, run string, lastID uint64) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/v1/runs/"+run+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if lastID > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatUint(lastID, 10))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		t.Fatalf("GET events (Last-Event-ID %d) = %d %s", lastID, resp.StatusCode, b)
	}
	return resp
}

// readSSE reads n events from sc, or every event to the end when n < 0.
func readSSE(t *testing.T, sc *bufio.Scanner, n int) []sse {
	t.Helper()
	var out []sse
	var cur sse
	for (n < 0 || len(out) < n) && sc.Scan() {
		line := sc.Text()
		switch {
		case line == "" && cur.typ != "":
			out = append(out, cur)
			cur = sse{}
		case strings.HasPrefix(line, "id: "):
			id, err := strconv.ParseUint(strings.TrimPrefix(line, "id: "), 10, 64)
			if err != nil {
				t.Fatalf("bad id line %q", line)
			}
			cur.id = id
		case strings.HasPrefix(line, "event: "):
			cur.typ = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d struct {
				Data struct {
					Note string `json:"note"`
				} `json:"data"`
			}
			_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d)
			cur.note = d.Data.Note
		}
	}
	if n >= 0 && len(out) < n {
		t.Fatalf("stream ended after %d events, want %d: %v (%v)", len(out), n, out, sc.Err())
	}
	return out
}

func names(es []sse) string {
	var b strings.Builder
	for _, e := range es {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(e.typ)
		if e.note != "" {
			b.WriteString(":" + e.note)
		}
	}
	return b.String()
}

// TestRunEventsResume reads a live run's stream, drops it, and resumes it
// with Last-Event-ID: the events after that id follow once each, in order,
// then the live ones, and the stream ends after the run's end event. Once
// the run has ended, a stream from the start (and one resumed midway)
// replays its stored events without a consumer and ends the same way.
func TestRunEventsResume(t *testing.T) {
	t.Parallel()
	s := newAuthStack(t, "postgres", -1) // no worker: the run stays pending
	tok := s.mint(t, auth.ScopeSubmit, "acme")
	var sess, run struct {
		ID string `json:"id"`
	}
	s.mustCall(t, http.StatusCreated, tok.Secret, "POST", "/v1/sessions", `{"user":"hello"}`, &sess)
	s.mustCall(t, http.StatusCreated, tok.Secret, "POST", "/v1/runs", `{"agent":`+spec+`,"session":"`+sess.ID+`"}`, &run)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	note := func(n string) {
		t.Helper()
		data, _ := json.Marshal(map[string]string{"note": n})
		if err := s.dev.Backend.Bus.PublishEvent(ctx, bus.Event{RunID: run.ID, Type: "step.note_probe", Data: data}); err != nil {
			t.Fatal(err)
		}
		if err := s.dev.Backend.Bus.FlushEvents(ctx); err != nil {
			t.Fatal(err)
		}
	}
	note("n1")
	note("n2")
	resp := openSSE(ctx, t, s, tok.Secret, run.ID, 0)
	sc := bufio.NewScanner(resp.Body)
	first := readSSE(t, sc, 3)
	note("n3")
	first = append(first, readSSE(t, sc, 1)...)
	_ = resp.Body.Close()
	if got := names(first); got != "run.submitted step.note_probe:n1 step.note_probe:n2 step.note_probe:n3" {
		t.Fatalf("first stream: %s", got)
	}
	for i, e := range first {
		if e.id == 0 || i > 0 && e.id <= first[i-1].id {
			t.Fatalf("first stream's ids are not increasing stream sequences: %+v", first)
		}
	}

	// Resume after n1, while the run is live: n2, n3, then n4 and the end.
	resp = openSSE(ctx, t, s, tok.Secret, run.ID, first[1].id)
	sc = bufio.NewScanner(resp.Body)
	resumed := readSSE(t, sc, 2)
	note("n4")
	s.mustCall(t, http.StatusOK, tok.Secret, "POST", "/v1/runs/"+run.ID+"/cancel", "", nil)
	resumed = append(resumed, readSSE(t, sc, -1)...)
	_ = resp.Body.Close()
	if got := names(resumed); got != "step.note_probe:n2 step.note_probe:n3 step.note_probe:n4 run.canceled" {
		t.Fatalf("resumed after n1: %s (want n2 n3 n4 run.canceled, each once, then the end)", got)
	}
	if resumed[0].id != first[2].id || resumed[1].id != first[3].id {
		t.Fatalf("resumed ids %+v differ from the first stream's %+v", resumed, first)
	}

	// The run has ended: the whole story from the start, then from n3.
	resp = openSSE(ctx, t, s, tok.Secret, run.ID, 0)
	all := readSSE(t, bufio.NewScanner(resp.Body), -1)
	_ = resp.Body.Close()
	if got := names(all); got != "run.submitted step.note_probe:n1 step.note_probe:n2 step.note_probe:n3 step.note_probe:n4 run.canceled" {
		t.Fatalf("ended run's stream: %s", got)
	}
	if all[len(all)-1].id == 0 {
		t.Fatalf("the stored run.canceled came without its id: %+v", all)
	}
	resp = openSSE(ctx, t, s, tok.Secret, run.ID, all[3].id)
	tail := readSSE(t, bufio.NewScanner(resp.Body), -1)
	_ = resp.Body.Close()
	if got := names(tail); got != "step.note_probe:n4 run.canceled" {
		t.Fatalf("ended run's stream after n3: %s", got)
	}

	// pkg/client reads the same: typed events with their ids, from After.
	cl, err := client.New(s.url, tok.Secret)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := cl.WatchRun(ctx, run.ID, client.WatchOptions{After: all[2].id}, func(e api.Event) error {
		got = append(got, fmt.Sprintf("%s@%d", e.Type, e.ID))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("step.note_probe@%d step.note_probe@%d run.canceled@%d", all[3].id, all[4].id, all[5].id)
	if strings.Join(got, " ") != want {
		t.Fatalf("client.WatchRun after n2: %v, want %s", got, want)
	}

	// A Last-Event-ID that is not a sequence is refused, naming it.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/v1/runs/"+run.ID+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+tok.Secret)
	req.Header.Set("Last-Event-ID", "yesterday")
	bad, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(bad.Body)
	_ = bad.Body.Close()
	if bad.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "Last-Event-ID") {
		t.Fatalf("Last-Event-ID: yesterday = %d %s, want 400 naming the header", bad.StatusCode, b)
	}
}

// TestRunEventsBatch: the events of a batch (one message of the events
// stream, as a step that ends within its worker's linger sends them) go
// out as events of their own, in order, and only the last carries an id
// (the message's sequence): a client resumes after a whole message, never
// inside one, so a resume after a batch's id repeats none of it and one
// after the event before it gets all of it. Live and replayed alike.
func TestRunEventsBatch(t *testing.T) {
	t.Parallel()
	s := newAuthStack(t, "postgres", -1) // no worker: the run stays pending
	tok := s.mint(t, auth.ScopeSubmit, "acme")
	var run struct {
		ID string `json:"id"`
	}
	s.mustCall(t, http.StatusCreated, tok.Secret, "POST", "/v1/runs", `{"agent":`+spec+`,"message":"hello"}`, &run)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	probe := func(n string) bus.Event {
		data, _ := json.Marshal(map[string]string{"note": n})
		return bus.Event{RunID: run.ID, Type: "step.note_probe", Data: data}
	}
	publish := func(es ...bus.Event) {
		t.Helper()
		if err := s.dev.Backend.Bus.PublishEvents(ctx, es); err != nil {
			t.Fatal(err)
		}
		if err := s.dev.Backend.Bus.FlushEvents(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(es []sse) string {
		var b strings.Builder
		for i, e := range es {
			if i > 0 {
				b.WriteByte(' ')
			}
			if e.id != 0 {
				b.WriteString("#")
			} else {
				b.WriteString("-")
			}
		}
		return b.String()
	}

	resp := openSSE(ctx, t, s, tok.Secret, run.ID, 0)
	sc := bufio.NewScanner(resp.Body)
	first := readSSE(t, sc, 1)
	publish(probe("b1"), probe("b2"), probe("b3"))
	first = append(first, readSSE(t, sc, 3)...)
	_ = resp.Body.Close()
	if got := names(first); got != "run.submitted step.note_probe:b1 step.note_probe:b2 step.note_probe:b3" {
		t.Fatalf("live stream: %s", got)
	}
	if got := ids(first); got != "# - - #" || first[3].id <= first[0].id {
		t.Fatalf("live stream's ids %s (%+v), want one on run.submitted and one on the batch's last", got, first)
	}

	// Resumed after the batch, live: none of it again.
	resp = openSSE(ctx, t, s, tok.Secret, run.ID, first[3].id)
	sc = bufio.NewScanner(resp.Body)
	publish(probe("n4"))
	after := readSSE(t, sc, 1)
	s.mustCall(t, http.StatusOK, tok.Secret, "POST", "/v1/runs/"+run.ID+"/cancel", "", nil)
	after = append(after, readSSE(t, sc, -1)...)
	_ = resp.Body.Close()
	if got := names(after); got != "step.note_probe:n4 run.canceled" {
		t.Fatalf("resumed after the batch: %s, want n4 and the end", got)
	}

	// Ended: replayed from the start, and from before the batch.
	resp = openSSE(ctx, t, s, tok.Secret, run.ID, 0)
	all := readSSE(t, bufio.NewScanner(resp.Body), -1)
	_ = resp.Body.Close()
	if got := names(all) + " / " + ids(all); got != "run.submitted step.note_probe:b1 step.note_probe:b2 step.note_probe:b3 step.note_probe:n4 run.canceled / # - - # # #" {
		t.Fatalf("ended run's stream: %s", got)
	}
	resp = openSSE(ctx, t, s, tok.Secret, run.ID, all[0].id)
	tail := readSSE(t, bufio.NewScanner(resp.Body), -1)
	_ = resp.Body.Close()
	if got := names(tail); got != "step.note_probe:b1 step.note_probe:b2 step.note_probe:b3 step.note_probe:n4 run.canceled" {
		t.Fatalf("ended run's stream after run.submitted: %s", got)
	}

	// pkg/client reads the batch's events too, the last with its id.
	cl, err := client.New(s.url, tok.Secret)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := cl.WatchRun(ctx, run.ID, client.WatchOptions{After: all[0].id}, func(e api.Event) error {
		got = append(got, fmt.Sprintf("%s@%d", e.Type, e.ID))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("step.note_probe@0 step.note_probe@0 step.note_probe@%d step.note_probe@%d run.canceled@%d", all[3].id, all[4].id, all[5].id)
	if strings.Join(got, " ") != want {
		t.Fatalf("client.WatchRun after run.submitted: %v, want %s", got, want)
	}
}

// TestRunEventsExpired: an ended run whose events are gone from the events
// stream (retention) gets a stream that says so and ends with the stored
// run's end.
func TestRunEventsExpired(t *testing.T) {
	t.Parallel()
	s := newAuthStack(t, "postgres", -1)
	tok := s.mint(t, auth.ScopeSubmit, "acme")
	var sess, run struct {
		ID string `json:"id"`
	}
	s.mustCall(t, http.StatusCreated, tok.Secret, "POST", "/v1/sessions", `{"user":"hello"}`, &sess)
	s.mustCall(t, http.StatusCreated, tok.Secret, "POST", "/v1/runs", `{"agent":`+spec+`,"session":"`+sess.ID+`"}`, &run)
	s.mustCall(t, http.StatusOK, tok.Secret, "POST", "/v1/runs/"+run.ID+"/cancel", "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.dev.Backend.Bus.FlushEvents(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := s.dev.Backend.Bus.JetStream().Stream(ctx, bus.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(bus.EventSubject(run.ID, ">"))); err != nil {
		t.Fatal(err)
	}
	resp := openSSE(ctx, t, s, tok.Secret, run.ID, 0)
	got := readSSE(t, bufio.NewScanner(resp.Body), -1)
	_ = resp.Body.Close()
	if names(got) != "events.missing run.canceled" || got[1].id != 0 {
		t.Fatalf("expired run's stream: %+v, want events.missing then run.canceled made from the stored run (no id)", got)
	}
}

// TestRunEventsLostEnd: a live run's stream whose end event never reaches
// the events stream (here the run is ended in the store, publishing
// nothing) still ends, with the end made from the stored run, once the
// stream looks at the run; and another tenant resuming the stream gets 404.
func TestRunEventsLostEnd(t *testing.T) {
	t.Parallel()
	s := newAuthStack(t, "postgres", -1)
	tok := s.mint(t, auth.ScopeSubmit, "acme")
	eve := s.mint(t, auth.ScopeRead, "umbrella")
	var sess, run struct {
		ID string `json:"id"`
	}
	s.mustCall(t, http.StatusCreated, tok.Secret, "POST", "/v1/sessions", `{"user":"hello"}`, &sess)
	s.mustCall(t, http.StatusCreated, tok.Secret, "POST", "/v1/runs", `{"agent":`+spec+`,"session":"`+sess.ID+`"}`, &run)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp := openSSE(ctx, t, s, tok.Secret, run.ID, 0)
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	first := readSSE(t, sc, 1)
	if _, err := s.dev.Backend.Runs.Cancel(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	rest := readSSE(t, sc, -1)
	if names(first) != "run.submitted" || names(rest) != "run.canceled" || rest[0].id != 0 {
		t.Fatalf("stream %+v then %+v; want run.submitted, then run.canceled made from the stored run (no id)", first, rest)
	}

	for _, q := range []string{"", "?after=1"} {
		code, b := s.call(t, eve.Secret, "GET", "/v1/runs/"+run.ID+"/events"+q, "")
		if code != http.StatusNotFound || strings.Contains(string(b), "data:") {
			t.Errorf("another tenant's GET events%s = %d %s, want 404 without events", q, code, b)
		}
	}
}
