package ui_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rath-run/rath/internal/worker"
	"github.com/rath-run/rath/pkg/api"
)

// cutProxy serves the dev stack at upstream and cuts the first stream of
// a run's events inside its first batch: after the second event without
// an id, the events of a step stored as one message whose id rides on the
// batch's last event. The stream it cuts asks EventSource to reconnect
// after 100 ms; the streams after that pass as they are.
type cutProxy struct {
	upstream *url.URL
	proxy    *httputil.ReverseProxy

	mu      sync.Mutex
	streams int      // event streams opened through the proxy
	resumes []string // the Last-Event-ID of each stream after the first
	cut     bool     // the first stream was cut inside a batch
}

func newCutProxy(t *testing.T, upstream string) *cutProxy {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	return &cutProxy{upstream: u, proxy: httputil.NewSingleHostReverseProxy(u)}
}

func (p *cutProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/events") {
		p.proxy.ServeHTTP(w, r)
		return
	}
	p.mu.Lock()
	p.streams++
	first := p.streams == 1
	if !first {
		p.resumes = append(p.resumes, r.Header.Get("Last-Event-ID"))
	}
	p.mu.Unlock()
	if !first {
		p.proxy.ServeHTTP(w, r) // it flushes an event stream as it comes
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, p.upstream.ResolveReference(r.URL).String(), nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	_, _ = io.WriteString(w, "retry: 100\n\n")
	flush()
	sc := bufio.NewScanner(resp.Body)
	hasID, idless := false, 0
	for sc.Scan() {
		line := sc.Text()
		_, _ = io.WriteString(w, line+"\n")
		switch {
		case strings.HasPrefix(line, "id:"):
			hasID = true
		case line == "":
			flush()
			if !hasID {
				idless++
			}
			hasID = false
			if idless == 2 {
				p.mu.Lock()
				p.cut = true
				p.mu.Unlock()
				return // the stream ends inside the batch
			}
		}
	}
}

// TestBrowserResumesInsideABatch opens the run page of an ended one-step
// run through a proxy that cuts the page's event stream inside the step's
// batch. EventSource reopens it after the last id it saw, the event
// before the batch, and the server sends the batch again from its first
// event: the page lists each event once.
func TestBrowserResumesInsideABatch(t *testing.T) {
	bctx := browserAt(t, 60*time.Second)
	ctx := context.Background()
	d, cl := devStack(t, 1, nil)
	// A worker of its own that holds a step's events until the step ends,
	// however long a loaded machine takes: they are one batch.
	runWorker(t, d, nil, worker.Config{Name: "batch-worker", Queue: "batch", ShutdownTimeout: 5 * time.Second, EventLinger: time.Minute})
	run, err := cl.SubmitAgent(ctx, api.SubmitRequest{Agent: json.RawMessage(liveAgent), Message: "Anyone there?", Queue: "batch"})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if run, err = cl.WaitRun(wctx, run.ID); err != nil {
		t.Fatal(err)
	}
	if run.Status != "succeeded" {
		t.Fatalf("run %s: %s", run.Status, run.Error)
	}
	p := newCutProxy(t, d.URL)
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)

	ended := chromedp.CSS(`#events li[data-type="run.completed"]`)
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/ui/#/run/"+run.ID), chromedp.WaitVisible(ended)); err != nil {
		t.Fatalf("run page: %v", err)
	}
	p.mu.Lock()
	cut, streams, resumes := p.cut, p.streams, p.resumes
	p.mu.Unlock()
	if !cut || streams < 2 {
		t.Fatalf("the proxy cut the stream: %v, streams opened: %d; want a cut and a second stream", cut, streams)
	}
	if resumes[0] == "" {
		t.Errorf("the reopened stream named no Last-Event-ID")
	}
	counts, err := chromedp.Run(bctx, chromedp.Evaluate[map[string]int](`(() => {
  const n = {};
  for (const li of document.querySelectorAll("#events li[data-type]")) n[li.dataset.type] = (n[li.dataset.type] || 0) + 1;
  return n;
})()`))
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"run.submitted", "step.started", "step.committed", "run.completed"} {
		if counts[typ] != 1 {
			t.Errorf("the page lists %s %d times, want once (all: %v; the stream reopened after id %q)", typ, counts[typ], counts, resumes[0])
		}
	}
}
