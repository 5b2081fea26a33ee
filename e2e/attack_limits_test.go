package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/testenv"
)

// Attacks on the coordinator's resource limits (issue #19, findings 6, 10
// and 11): a tenant's token, or no token at all, must not be able to take
// the API away from other tenants or sign a browser in.

// api sends one request to the secured coordinator with token (none when
// empty) and returns the response; the caller closes its body.
func (s *secured) api(ctx context.Context, token, method, path, body string) (*http.Response, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.server+path, rd)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return http.DefaultClient.Do(req)
}

// liveRun submits a client-driven workflow run as token: it stays running
// until its driver (or a cancel) ends it, and needs no worker.
func (s *secured) liveRun(token string) string {
	s.t.Helper()
	res, err := s.api(context.Background(), token, http.MethodPost, "/v1/runs", `{"driver":"client","message":"held open"}`)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	var r struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(res.Body).Decode(&r); err != nil || res.StatusCode != http.StatusCreated || r.ID == "" {
		s.t.Fatalf("submit a client-driven run: %d, %v", res.StatusCode, err)
	}
	return r.ID
}

func (s *secured) cancelRun(token, id string) {
	s.t.Helper()
	res, err := s.api(context.Background(), token, http.MethodPost, "/v1/runs/"+id+"/cancel", "")
	if err != nil {
		s.t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		s.t.Fatalf("cancel run %s: %d", id, res.StatusCode)
	}
}

// eventStream is an open GET /v1/runs/{id}/events.
type eventStream struct {
	res    *http.Response
	cancel context.CancelFunc
	events chan string // event types, closed when the stream ends
}

// openEvents opens a run's event stream as token. A non-200 answer is
// returned with its body read into msg and no stream.
func (s *secured) openEvents(token, id string) (st *eventStream, status int, msg string, hdr http.Header) {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	res, err := s.api(ctx, token, http.MethodGet, "/v1/runs/"+id+"/events", "") //nolint:bodyclose // eventStream.close closes it, or below when refused
	if err != nil {
		cancel()
		s.t.Fatalf("GET /v1/runs/%s/events: %v", id, err)
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		cancel()
		return nil, res.StatusCode, string(b), res.Header
	}
	st = &eventStream{res: res, cancel: cancel, events: make(chan string, 64)}
	go func() {
		defer close(st.events)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if typ, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				st.events <- typ
			}
		}
	}()
	s.t.Cleanup(st.close)
	return st, res.StatusCode, "", res.Header
}

func (st *eventStream) close() {
	st.cancel()
	st.res.Body.Close()
}

// waitEvent waits up to d for an event of type typ on the stream.
func (st *eventStream) waitEvent(t *testing.T, typ string, d time.Duration) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	var seen []string
	for {
		select {
		case e, ok := <-st.events:
			if !ok {
				t.Fatalf("stream ended without %s (saw %v)", typ, seen)
			}
			if e == typ {
				return
			}
			seen = append(seen, e)
		case <-timer.C:
			t.Fatalf("no %s within %s (saw %v)", typ, d, seen)
		}
	}
}

// eventConsumers counts the consumers of the events stream, as the
// operator sees them.
func (s *secured) eventConsumers() int {
	s.t.Helper()
	nc, err := nats.Connect(s.natsURL, nats.UserInfo("coordinator", secCoordPW))
	if err != nil {
		s.t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, bus.EventsStream)
	if err != nil {
		s.t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	return info.State.Consumers
}

// TestAttackEventsConsumers is finding 6: umbrella's read token fires
// 1,100 concurrent requests at the event stream of its own ended run. Each
// used to create a JetStream consumer that lingered 30 s, so the events
// stream's consumer limit (1,000, the server's default) filled and acme's
// live stream then failed with 500. Now an ended run's stream is answered
// from the stored run without a consumer, live streams are capped per
// token and per tenant (429 with Retry-After), and a stream's consumer is
// deleted when the stream ends.
func TestAttackEventsConsumers(t *testing.T) {
	t.Parallel()
	s := newSecured(t, secOptions{CoordEnv: []string{
		"RATH_EVENT_STREAMS_PER_TOKEN=3", "RATH_EVENT_STREAMS_PER_TENANT=5",
		// Short server timeouts: a live stream must outlast them.
		"RATH_HTTP_READ_TIMEOUT=2s", "RATH_HTTP_WRITE_TIMEOUT=2s",
	}})
	acmeSubmit, acmeRead := s.mint("submit", "acme"), s.mint("read", "acme")
	umbSubmit, umbRead, umbRead2 := s.mint("submit", "umbrella"), s.mint("read", "umbrella"), s.mint("read", "umbrella")

	ended := s.liveRun(umbSubmit)
	s.cancelRun(umbSubmit, ended)
	acmeRun := s.liveRun(acmeSubmit)

	// The flood: bounded in count (1,100) and time (40 s).
	const total, workers = 1100, 16
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	var next, sent atomic.Int64
	var mu sync.Mutex
	statuses := map[int]int{}
	var failures []string // requests that got no answer, why
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= total && ctx.Err() == nil {
				res, err := s.api(ctx, umbRead, http.MethodGet, "/v1/runs/"+ended+"/events", "")
				if err != nil {
					mu.Lock()
					failures = append(failures, err.Error())
					mu.Unlock()
					continue
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				sent.Add(1)
				mu.Lock()
				statuses[res.StatusCode]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("umbrella's flood: %d requests in %s, statuses %v", sent.Load(), time.Since(start).Round(time.Millisecond), statuses)
	if sent.Load() < total {
		t.Fatalf("the flood sent %d of %d requests within its time; unanswered: %q", sent.Load(), total, failures[:min(len(failures), 5)])
	}

	// Acme's live stream works and, past the server's read and write
	// timeouts, still delivers its run's end.
	st, status, msg, _ := s.openEvents(acmeRead, acmeRun)
	if st == nil {
		t.Fatalf("acme's GET /v1/runs/%s/events after umbrella's flood: status %d: %s", acmeRun, status, msg)
	}
	opened := time.Now()
	testenv.Eventually(t, 10*time.Second, "the server's 2 s timeouts pass", func() bool { return time.Since(opened) > 3*time.Second })
	s.cancelRun(acmeSubmit, acmeRun)
	st.waitEvent(t, "run.canceled", 20*time.Second)
	st.close()

	// Umbrella's live streams: three per token, five for the tenant; past
	// either cap a 429 that says so and when to retry.
	live := s.liveRun(umbSubmit)
	var held []*eventStream
	for i := range 3 {
		st, status, msg, _ := s.openEvents(umbRead, live)
		if st == nil {
			t.Fatalf("umbrella's stream %d of its token's 3: %d %s", i+1, status, msg)
		}
		held = append(held, st)
	}
	if st, status, msg, hdr := s.openEvents(umbRead, live); st != nil || status != http.StatusTooManyRequests ||
		!strings.Contains(msg, "per token") || hdr.Get("Retry-After") == "" {
		t.Fatalf("umbrella's 4th stream on one token: %d %q Retry-After %q; want 429 naming the per-token cap", status, msg, hdr.Get("Retry-After"))
	}
	for i := range 2 {
		st, status, msg, _ := s.openEvents(umbRead2, live)
		if st == nil {
			t.Fatalf("umbrella's stream %d on its second token: %d %s", i+1, status, msg)
		}
		held = append(held, st)
	}
	if st, status, msg, hdr := s.openEvents(umbRead2, live); st != nil || status != http.StatusTooManyRequests ||
		!strings.Contains(msg, "per tenant") || hdr.Get("Retry-After") == "" {
		t.Fatalf("umbrella's 6th stream: %d %q Retry-After %q; want 429 naming the per-tenant cap", status, msg, hdr.Get("Retry-After"))
	}
	// Acme is not held to umbrella's caps.
	acmeLive := s.liveRun(acmeSubmit)
	st, status, msg, _ = s.openEvents(acmeRead, acmeLive)
	if st == nil {
		t.Fatalf("acme's stream while umbrella is at its caps: %d %s", status, msg)
	}
	st.close()

	// Ended streams free their slots and their consumers at once, not
	// after the server's 30 s inactivity threshold.
	for _, h := range held {
		h.close()
	}
	testenv.Eventually(t, 10*time.Second, "umbrella's token may stream again", func() bool {
		st, _, _, _ := s.openEvents(umbRead, live)
		if st != nil {
			st.close()
		}
		return st != nil
	})
	testenv.Eventually(t, 10*time.Second, "the ended streams' consumers are deleted", func() bool {
		return s.eventConsumers() <= 1 // the coordinator's own watch of every event
	})
}

// TestAttackSlowloris is finding 10: without a token, hold many
// connections to POST /ui/login that send their headers and then never
// finish the body. The server used to wait on them forever, so with the
// process's file descriptors exhausted /healthz and /v1 stopped answering.
// The coordinator's descriptor limit is lowered (as an operator's ulimit
// would be) so that a few hundred connections show it. Now the read
// timeout closes them, the connection cap keeps accepting within the
// descriptors, and the separate health listener answers throughout.
func TestAttackSlowloris(t *testing.T) {
	t.Parallel()
	healthAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	s := newSecured(t, secOptions{CoordEnv: []string{
		"RATH_HTTP_MAX_CONNS=150", "RATH_HTTP_READ_TIMEOUT=2s", "RATH_HEALTH_ADDR=" + healthAddr,
	}})
	read := s.mint("read", "acme")
	var coord *proc
	for _, p := range s.procs {
		if p.name == "coordinator" {
			coord = p
		}
	}
	pid := coord.cmd.Process.Pid
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	limit := len(fds) + 250
	if out, err := exec.Command("prlimit", "--pid", strconv.Itoa(pid), fmt.Sprintf("--nofile=%d:%d", limit, limit)).CombinedOutput(); err != nil {
		t.Fatalf("prlimit (util-linux) lowers the coordinator's descriptor limit: %v: %s", err, out)
	}

	host := strings.TrimPrefix(s.server, "http://")
	const slow = 400
	var closed atomic.Int64
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range slow {
		c, err := net.DialTimeout("tcp", host, 5*time.Second)
		if err != nil {
			t.Fatalf("slow connection %d: %v", i, err)
		}
		conns = append(conns, c)
		if _, err := fmt.Fprintf(c, "POST /ui/login HTTP/1.1\r\nHost: %s\r\nOrigin: %s\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 200\r\n\r\ntoken=", host, s.server); err != nil {
			t.Fatalf("slow connection %d: %v", i, err)
		}
		go func() {
			_, _ = io.Copy(io.Discard, c) // returns when the server closes it
			closed.Add(1)
		}()
	}

	// For 15 s (bounded), probe the health listener and count the slow
	// connections the server has closed.
	probe := func(u string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+read)
		res, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		if err != nil {
			return err
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", res.StatusCode)
		}
		return nil
	}
	var healthFailures []string
	deadline := time.Now().Add(15 * time.Second)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) && closed.Load() < slow {
		if err := probe("http://" + healthAddr + "/healthz"); err != nil {
			healthFailures = append(healthFailures, err.Error())
		}
		<-tick.C
	}
	// The API answers again (the attacker still holds whatever the server
	// has not closed).
	for _, path := range []string{"/healthz", "/v1/whoami"} {
		if err := probe(s.server + path); err != nil {
			t.Errorf("GET %s with %d of %d slow connections still open: %v", path, slow-closed.Load(), slow, err)
		}
	}
	if open := slow - closed.Load(); open > 0 {
		t.Errorf("%d of %d slow connections still open after 15 s: nothing closes a request that sends its body slowly", open, slow)
	}
	if len(healthFailures) > 0 {
		t.Errorf("the health listener failed %d probes during the attack: %v", len(healthFailures), healthFailures[:min(3, len(healthFailures))])
	}
}

// TestAttackLoginCSRF is finding 11: a page on another site posts the
// attacker's own token to POST /ui/login, signing the victim's browser in
// as the attacker (whose views then show what the victim types). A missing
// Origin, "null" (sandboxed frames, data: URLs) and another origin are
// refused with 403 and no cookie; the UI's own form still logs in.
func TestAttackLoginCSRF(t *testing.T) {
	t.Parallel()
	s := newSecured(t)
	attacker := s.mint("read", "umbrella")
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post := func(origin string) (int, []*http.Cookie) {
		req, err := http.NewRequest(http.MethodPost, s.server+"/ui/login", strings.NewReader(url.Values{"token": {attacker}}.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode, res.Cookies()
	}
	for _, origin := range []string{"null", "", "http://evil.example", strings.Replace(s.server, "127.0.0.1", "localhost", 1)} {
		if code, cookies := post(origin); code != http.StatusForbidden || len(cookies) != 0 {
			t.Errorf("POST /ui/login with Origin %q: %d, cookies %v; want 403 and no cookie", origin, code, cookies)
		}
	}
	if code, cookies := post(s.server); code != http.StatusSeeOther || len(cookies) != 1 {
		t.Fatalf("same-origin POST /ui/login: %d, cookies %v; want 303 and the cookie", code, cookies)
	}
}

// TestAttackUICookieWrites: the web UI's cookie authenticates one write,
// the review button (POST /v1/runs/{id}/review with the X-Rath-UI header
// from the server's own origin), and nothing else. A cross-site form (no
// header), another origin, a missing Origin, or any other write (submit,
// cancel, approvals) with the cookie is unauthenticated: 401. The button's
// request gets the token's own scope and tenant: a read token's is 403,
// another tenant's run is 404, and the owner's reaches the review (409:
// nothing waits for one).
func TestAttackUICookieWrites(t *testing.T) {
	t.Parallel()
	s := newSecured(t)
	acme, acmeRead, umbrella := s.mint("submit", "acme"), s.mint("read", "acme"), s.mint("submit", "umbrella")
	run := s.liveRun(acme)
	post := func(cookie, origin, path, body string, uiHeader bool) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, s.server+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.AddCookie(&http.Cookie{Name: "rath_ui_token", Value: cookie})
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if uiHeader {
			req.Header.Set("X-Rath-UI", "1")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	review := "/v1/runs/" + run + "/review"
	retry := `{"decision":"retry"}`
	for _, c := range []struct {
		name, cookie, origin, path, body string
		header                           bool
		want                             int
	}{
		{"the button, the owner's token", acme, s.server, review, retry, true, http.StatusConflict},
		{"the button, a read token", acmeRead, s.server, review, retry, true, http.StatusForbidden},
		{"the button, another tenant's token", umbrella, s.server, review, retry, true, http.StatusNotFound},
		{"a form (no UI header)", acme, s.server, review, retry, false, http.StatusUnauthorized},
		{"another site", acme, "http://evil.example", review, retry, true, http.StatusUnauthorized},
		{"no Origin", acme, "", review, retry, true, http.StatusUnauthorized},
		{"Origin null", acme, "null", review, retry, true, http.StatusUnauthorized},
		{"submit", acme, s.server, "/v1/runs", `{"driver":"client","message":"planted"}`, true, http.StatusUnauthorized},
		{"cancel", acme, s.server, "/v1/runs/" + run + "/cancel", "", true, http.StatusUnauthorized},
		{"approve", acme, s.server, "/v1/runs/" + run + "/approvals", `{"decision":"approve"}`, true, http.StatusUnauthorized},
	} {
		if code, body := post(c.cookie, c.origin, c.path, c.body, c.header); code != c.want {
			t.Errorf("%s: POST %s with the UI cookie: %d %s, want %d", c.name, c.path, code, body, c.want)
		}
	}
	res, err := s.api(context.Background(), acme, http.MethodGet, "/v1/runs/"+run, "")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var r struct{ Status string }
	if err := json.NewDecoder(res.Body).Decode(&r); err != nil || r.Status != "pending" {
		t.Errorf("the run after the attempts: %q, %v; want pending as submitted (not canceled)", r.Status, err)
	}
}
