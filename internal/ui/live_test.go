package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/internal/worker"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/client"
)

// browserAt starts headless Chromium with a 1400×900 viewport and returns
// a context for it that ends after timeout.
func browserAt(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	exe := testenv.RequireChromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.WindowSize(1400, 900))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to sandbox as root
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	browser, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(browser, chromedp.EmulateViewport(1400, 900)); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	bctx, cancel := context.WithTimeout(browser, timeout)
	t.Cleanup(cancel)
	return bctx
}

// jaegerURL is the dev stack's RATH_JAEGER_URL: the UI's trace links
// start with it.
const jaegerURL = "http://jaeger.test:16686"

// devStack starts a dev stack on a fresh SQLite store and a client for it.
func devStack(t *testing.T, workers int, tp trace.TracerProvider) (*app.Dev, *client.Client) {
	t.Helper()
	dir := t.TempDir()
	d, err := app.StartDev(context.Background(), app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", Workers: workers, Slots: 8,
		StoreURL: "sqlite:" + filepath.Join(dir, "rath.db"), JaegerURL: jaegerURL, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	cl, err := client.New(d.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	return d, cl
}

// runWorker runs a worker of the test's own on the dev stack's backend
// (its queue, its settings) until the test ends, and reports its error
// then. getenv nil reads nothing.
func runWorker(t *testing.T, d *app.Dev, getenv func(string) string, cfg worker.Config) {
	t.Helper()
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	ctx, stop := context.WithCancel(context.Background())
	w, err := app.NewWorker(ctx, d.Backend, getenv, cfg)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("worker %s: %v", cfg.Name, err)
		}
	})
}

// textOf reads the rendered text of the element sel selects in one
// evaluation in the page. The live panels are drawn anew as events
// arrive, so a node chromedp.Text has found can be gone by the time it
// asks for the node's text ("No node with given id found", seen in CI).
func textOf(ctx context.Context, sel string) (string, error) {
	q, err := json.Marshal(sel)
	if err != nil {
		return "", err
	}
	return chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const e = document.querySelector(`+string(q)+`); if (!e) throw new Error("no element " + `+string(q)+`); return e.innerText; })()`))
}

// viewShot saves a screenshot of the 1400×900 viewport under
// $RATH_ARTIFACTS (default the OS temp dir) and, with RATH_UI_DOCS_IMG=1,
// as docs/img/<name>.png (the images docs/observability.md shows).
func viewShot(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	dir := os.Getenv("RATH_ARTIFACTS")
	if dir == "" {
		dir = os.TempDir()
	}
	paths := []string{filepath.Join(dir, name+".png")}
	if os.Getenv("RATH_UI_DOCS_IMG") == "1" {
		paths = append(paths, filepath.Join("..", "..", "docs", "img", name+".png"))
	}
	for _, p := range paths {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}
}

const fanout100 = `
version: 1
name: fanout100
agents:
  branch:
    model: scripted
    script: ["One branch's answer."]
steps:
  - fork: {n: 100, agent: branch}
`

// labelSizes measures every node label of the run graph as drawn: the
// smallest rendered height (getBoundingClientRect) and the smallest
// computed font size times the SVG's scale, in CSS pixels.
const labelSizes = `(() => {
  const svg = document.querySelector("svg#graph");
  const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
  const labels = [...svg.querySelectorAll("g.node text.label")];
  let box = Infinity, font = Infinity;
  for (const t of labels) {
    box = Math.min(box, t.getBoundingClientRect().height);
    font = Math.min(font, parseFloat(getComputedStyle(t).fontSize) * scale);
  }
  return {count: labels.length, box, font, scale, width: svg.viewBox.baseVal.width};
})()`

type sizes struct {
	Count int     `json:"count"`
	Box   float64 `json:"box"`
	Font  float64 `json:"font"`
	Scale float64 `json:"scale"`
	Width float64 `json:"width"`
}

// TestBrowserFanout100 opens the run page of a 100-branch fan-out at
// 1400×900: every version is a node, the layout stacks the branches in
// rows (a few columns wide, not one column per merge), node labels are at
// least 10 px high as drawn, Fit and 100% zoom, and the runs list shows
// the run's steps.
func TestBrowserFanout100(t *testing.T) {
	bctx := browserAt(t, 60*time.Second)
	ctx := context.Background()
	d, cl := devStack(t, 2, nil)
	r, err := cl.StartWorkflow(ctx, client.WorkflowRequest{Workflow: fanout100, Message: "Split this a hundred ways."})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 120*time.Second, "the 100-branch run to end", func() bool {
		if r, err = cl.GetRun(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		return r.Terminal()
	})
	if r.Status != "succeeded" || len(r.Steps) != 100 {
		t.Fatalf("fan-out run %s with %d steps (%s), want succeeded with 100", r.Status, len(r.Steps), r.Error)
	}
	var graph api.Graph
	if err := cl.Do(ctx, "GET", "/v1/runs/"+r.ID+"/graph?format=json", nil, &graph); err != nil {
		t.Fatal(err)
	}
	if len(graph.Nodes) < 300 {
		t.Fatalf("graph has %d nodes, want ≥ 300 (input, 100 forks, 100 branches, 99 merges)", len(graph.Nodes))
	}

	if err := chromedp.Do(bctx,
		chromedp.Navigate(d.URL+"/ui/#/run/"+r.ID),
		chromedp.WaitVisible(chromedp.CSS(`svg#graph g.node`)),
	); err != nil {
		t.Fatalf("run page: %v", err)
	}
	got, err := chromedp.Run(bctx, chromedp.Evaluate[sizes](labelSizes))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("100-branch fan-out as opened: %d labels, smallest box %.1f px, font × zoom %.1f px, zoom %.2f, graph width %.0f",
		got.Count, got.Box, got.Font, got.Scale, got.Width)
	if got.Count != len(graph.Nodes) {
		t.Errorf("the graph draws %d nodes with labels, want %d", got.Count, len(graph.Nodes))
	}
	if got.Box < 10 || got.Font < 10 {
		t.Errorf("node labels are %.1f px high (font × zoom %.1f px), want ≥ 10", got.Box, got.Font)
	}
	// The branches stack in rows: the graph is a few columns wide, not one
	// column per merge (99 of them).
	if got.Width > 6*208 {
		t.Errorf("graph is %.0f px wide, want ≤ %d (a few columns)", got.Width, 6*208)
	}
	viewShot(bctx, t, "ui-fanout-100")

	// Fit shows the whole graph (smaller), 100% brings it back.
	if err := clickNow(bctx, `.graph-tools button[data-zoom="fit"]`); err != nil {
		t.Fatal(err)
	}
	fit, err := chromedp.Run(bctx, chromedp.Evaluate[sizes](labelSizes))
	if err != nil {
		t.Fatal(err)
	}
	if err := clickNow(bctx, `.graph-tools button[data-zoom="100"]`); err != nil {
		t.Fatal(err)
	}
	full, err := chromedp.Run(bctx, chromedp.Evaluate[sizes](labelSizes))
	if err != nil {
		t.Fatal(err)
	}
	if !(fit.Scale < got.Scale) || full.Scale < 0.99 || full.Scale > 1.01 {
		t.Errorf("zoom: opened at %.2f, Fit %.2f (want smaller), 100%% %.2f (want 1)", got.Scale, fit.Scale, full.Scale)
	}

	// The session page of the run's input draws the same versions.
	if err := chromedp.Do(bctx,
		chromedp.Navigate(d.URL+"/ui/#/session/"+r.Input.String()),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`svg#graph g.node[data-id=%q]`, r.Input.String()))),
	); err != nil {
		body, _ := chromedp.Run(context.WithoutCancel(bctx), chromedp.Evaluate[string](`document.getElementById("view").innerText.slice(0, 500)`))
		t.Fatalf("session page: %v\n%s", err, body)
	}
	if n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("svg#graph g.node").length`)); err != nil || n < len(graph.Nodes) {
		t.Errorf("session page draws %d nodes (%v), want ≥ %d", n, err, len(graph.Nodes))
	}

	// The runs list shows the run's steps: their count, chips, states.
	if err := chromedp.Do(bctx,
		chromedp.Navigate(d.URL+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#runs tr[data-run=%q] td.steps .chip.committed`, r.ID))),
	); err != nil {
		t.Fatalf("runs list steps: %v", err)
	}
	cell, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(fmt.Sprintf(`#runs tr[data-run=%q] td.steps`, r.ID))))
	if err != nil {
		t.Fatal(err)
	}
	viewShot(bctx, t, "ui-runs")
	if !strings.HasPrefix(cell, "100 ") || !strings.Contains(cell, "100 committed") || !strings.Contains(cell, "branch") {
		t.Errorf("runs list steps cell %q, want 100 steps, their names and \"100 committed\"", cell)
	}
}

// blockingModel is an OpenAI-compatible chat endpoint that streams: its
// first reply writes a file with a tool call; its second streams part of
// its answer, then blocks until release is closed, then finishes.
type blockingModel struct {
	release chan struct{}
	started chan struct{} // closed when the second reply has streamed its first part
}

func (m *blockingModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Stream   bool `json:"stream"`
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || !req.Stream {
		http.Error(w, `{"error":{"message":"want a streamed chat request","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	tools := 0
	for _, msg := range req.Messages {
		if msg.Role == "tool" {
			tools++
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	send := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{"id": "chatcmpl-ui", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
			"choices": []map[string]any{{"index": 0, "delta": delta, "finish_reason": finish}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
		fl.Flush()
	}
	end := func() {
		b, _ := json.Marshal(map[string]any{"id": "chatcmpl-ui", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
			"choices": []any{}, "usage": map[string]int{"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29}})
		fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", b)
		fl.Flush()
	}
	if tools == 0 {
		send(map[string]any{"role": "assistant", "content": "Noting the plan first. "}, nil)
		send(map[string]any{"tool_calls": []map[string]any{{"index": 0, "id": "call_notes", "type": "function",
			"function": map[string]any{"name": "write_workspace_file", "arguments": `{"path":"notes.md","content":"Day 1: Fushimi Inari"}`}}}}, nil)
		send(map[string]any{}, "tool_calls")
		end()
		return
	}
	send(map[string]any{"role": "assistant", "content": "Day 1 starts at Fushimi Inari "}, nil)
	send(map[string]any{"content": "before the crowds, "}, nil)
	close(m.started)
	select {
	case <-m.release:
	case <-r.Context().Done():
		return
	}
	send(map[string]any{"content": "then Kiyomizu-dera."}, nil)
	send(map[string]any{}, "stop")
	end()
}

// TestBrowserLiveStep watches a run mid-step: a model that streams part of
// its answer after a tool call and blocks until the test releases it. The
// run page shows the step as a pending node carrying its tool call and
// the streamed text, event times are the events' own, and releasing the
// model turns the pending node into the committed version. Then a run
// waiting for an approval shows the call that waits and the commands that
// decide it, until it is approved.
func TestBrowserLiveStep(t *testing.T) {
	bctx := browserAt(t, 120*time.Second)
	ctx := context.Background()
	// Traces are recorded (and exported nowhere), so versions carry
	// trace ids for the UI to link.
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	d, cl := devStack(t, 1, tp)
	model := &blockingModel{release: make(chan struct{}), started: make(chan struct{})}
	srv := httptest.NewServer(model)
	t.Cleanup(srv.Close)
	released := false
	release := func() {
		if !released {
			released = true
			close(model.release)
		}
	}
	t.Cleanup(release)

	env := map[string]string{"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": srv.URL + "/v1"}
	runWorker(t, d, func(k string) string { return env[k] }, worker.Config{Name: "live-worker", Queue: "live", ShutdownTimeout: 5 * time.Second, TracerProvider: tp})

	var r runs.Run
	spec := json.RawMessage(`{"name":"guide","model":"gpt-test","tools":["builtin"]}`)
	if err := cl.Do(ctx, "POST", "/v1/runs", map[string]any{"agent": spec, "message": "Plan day 1 in Kyoto.", "queue": "live"}, &r); err != nil {
		t.Fatal(err)
	}
	select {
	case <-model.started:
	case <-time.After(60 * time.Second):
		t.Fatal("the model was not called twice within 60s")
	}
	pendingNode := chromedp.CSS(`svg#graph g.node.live.running[data-calls="1"]`)
	if err := chromedp.Do(bctx,
		chromedp.Navigate(d.URL+"/ui/#/run/"+r.ID),
		chromedp.WaitVisible(pendingNode),
		chromedp.WaitVisible(chromedp.CSS(`#events li[data-type="step.tool_result"]`)),
	); err != nil {
		t.Fatalf("pending node: %v", err)
	}
	// The streamed text reaches the node (its tail) and, on a click, the panel.
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`(() => { const t = document.querySelector("svg#graph g.node.live text.sub"); return !!t && t.textContent.includes("before the crowds"); })()`,
		chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("streamed text on the node: %v", err)
	}
	if err := chromedp.Do(bctx, chromedp.Click(pendingNode), chromedp.WaitVisible(chromedp.CSS(`#live-text`))); err != nil {
		t.Fatalf("live panel: %v", err)
	}
	streamed, err := textOf(bctx, `#live-text`)
	if err != nil {
		t.Fatal(err)
	}
	// The panel is drawn again as events arrive; the calls can reach it a
	// redraw after the text (seen in CI), so wait for them, then read.
	_, _ = chromedp.Run(bctx, chromedp.Poll[bool](`(() => { const c = document.querySelector("#live-calls"); return !!c && c.textContent.includes("done"); })()`,
		chromedp.WithPollingTimeout(10*time.Second)))
	calls, err := textOf(bctx, `#live-calls`)
	if err != nil {
		t.Fatal(err)
	}
	op, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector("svg#graph g.node.live text.op").textContent`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(streamed, "Day 1 starts at Fushimi Inari before the crowds,") {
		t.Errorf("panel shows streamed text %q", streamed)
	}
	if !strings.Contains(calls, "write_workspace_file") || !strings.Contains(calls, "call_notes") || !strings.Contains(calls, "done") {
		t.Errorf("panel shows tool calls %q, want write_workspace_file call_notes done", calls)
	}
	if op != "running · 1 tool call" {
		t.Errorf("pending node says %q", op)
	}

	// Event times are the events' own: the page's step.started time is
	// the one the API streams.
	var started api.Event
	wc, stopWatch := context.WithTimeout(ctx, 30*time.Second)
	_ = cl.Watch(wc, r.ID, func(e api.Event) error {
		if e.Type == api.EventStepStarted {
			started = e
			stopWatch()
		}
		return nil
	})
	stopWatch()
	attr, err := chromedp.Run(bctx, chromedp.AttributeValue(chromedp.CSS(`#events li[data-type="step.started"] time`), "datetime"))
	if err != nil {
		t.Fatal(err)
	}
	shown := attr.Value
	if at, err := time.Parse(time.RFC3339Nano, shown); err != nil || started.Time.IsZero() || !at.Equal(started.Time) {
		t.Errorf("step.started shown at %q (%v), the event's time is %s", shown, err, started.Time)
	}
	// A step in progress has no trace id yet: it links a search for its
	// spans.
	mid, err := cl.GetRun(ctx, r.ID)
	if err != nil || len(mid.Steps) != 1 {
		t.Fatalf("run mid-step %+v: %v", mid, err)
	}
	searchLink, err := chromedp.Run(bctx, chromedp.AttributeValue(chromedp.CSS(`#steps td.trace a.search`), "href"))
	if err != nil {
		t.Fatal(err)
	}
	if want := jaegerURL + "/search?service=rath-worker&limit=100&tags=" + url.QueryEscape(`{"rath.step.id":"`+mid.Steps[0].ID+`"}`); searchLink.Value != want {
		t.Errorf("step in progress links %q, want %q", searchLink.Value, want)
	}
	viewShot(bctx, t, "ui-live-step")

	// Released, the step commits: its version replaces the pending node.
	release()
	if err := chromedp.Do(bctx,
		chromedp.WaitVisible(chromedp.CSS(`#status.succeeded`)),
		chromedp.WaitNotPresent(chromedp.CSS(`svg#graph g.node.live`)),
		chromedp.WaitVisible(chromedp.CSS(`svg#graph g.node.output`)),
		chromedp.WaitVisible(chromedp.CSS(`#panel #chunks .chunk[data-kind="tool_result"]`)),
	); err != nil {
		t.Fatalf("after release: %v", err)
	}
	// The steps table links the step to its spans in Jaeger: the trace
	// its version records, the step found by its id; the run links a
	// search for its spans.
	done1, err := cl.GetRun(ctx, r.ID)
	if err != nil || len(done1.Steps) != 1 || done1.Steps[0].Output == nil {
		t.Fatalf("run %+v: %v", done1, err)
	}
	var v struct {
		Producer struct {
			TraceID string `json:"trace_id"`
		} `json:"producer"`
	}
	if err := cl.Do(ctx, "GET", "/v1/sessions/"+done1.Steps[0].Output.String(), nil, &v); err != nil || v.Producer.TraceID == "" {
		t.Fatalf("step version has trace id %q: %v", v.Producer.TraceID, err)
	}
	if err := chromedp.Do(bctx, chromedp.WaitVisible(chromedp.CSS(`#steps td.trace a.span`))); err != nil {
		t.Fatalf("step trace link: %v", err)
	}
	link, err := chromedp.Run(bctx, chromedp.AttributeValue(chromedp.CSS(`#steps td.trace a.span`), "href"))
	if err != nil {
		t.Fatal(err)
	}
	if want := jaegerURL + "/trace/" + v.Producer.TraceID + "?uiFind=" + url.QueryEscape(done1.Steps[0].ID); link.Value != want {
		t.Errorf("step links %q, want %q", link.Value, want)
	}
	search, err := chromedp.Run(bctx, chromedp.AttributeValue(chromedp.CSS(`#run-traces`), "href"))
	if err != nil {
		t.Fatal(err)
	}
	if want := jaegerURL + "/search?service=rath-worker&limit=100&tags=" + url.QueryEscape(`{"rath.run.id":"`+r.ID+`"}`); search.Value != want {
		t.Errorf("run links %q, want %q", search.Value, want)
	}

	// A waiting run names the call that waits and the commands deciding it.
	var wr runs.Run
	waits := json.RawMessage(`{"name":"careful","model":"scripted","tools":["builtin"],"approve":["write_workspace_file"],"script":[` +
		`{"content":"Saving.","tool_calls":[{"id":"call_save","function":{"name":"write_workspace_file","arguments":{"path":"a.md","content":"x"}}}]},"Saved."]}`)
	if err := cl.Do(ctx, "POST", "/v1/runs", map[string]any{"agent": waits, "message": "Save it."}, &wr); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx,
		chromedp.Navigate(d.URL+"/ui/#/run/"+wr.ID),
		chromedp.WaitVisible(chromedp.CSS(`#waiting .pending-call[data-call="call_save"]`)),
		chromedp.WaitVisible(chromedp.CSS(`svg#graph g.node.waiting`)),
	); err != nil {
		t.Fatalf("waiting run: %v", err)
	}
	box, err := textOf(bctx, `#waiting`)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"write_workspace_file", "call_save", "rathctl approve " + wr.ID + " --call call_save", "rathctl reject " + wr.ID + " --call call_save --reason"} {
		if !strings.Contains(box, want) {
			t.Errorf("waiting box:\n%s\nwant %q", box, want)
		}
	}
	viewShot(bctx, t, "ui-waiting")
	if err := cl.Do(ctx, "POST", "/v1/runs/"+wr.ID+"/approvals", api.ApprovalRequest{Decision: api.DecisionApprove, CallID: "call_save"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx,
		chromedp.WaitVisible(chromedp.CSS(`#status.succeeded`)),
		chromedp.WaitNotVisible(chromedp.CSS(`#waiting`)),
	); err != nil {
		t.Fatalf("after approval: %v", err)
	}
}

// clickNow clicks the element selector finds, found and clicked in one
// step in the page: the live page redraws its toolbar as events arrive,
// so a node found by one DevTools call can be gone by the next (chromedp's
// Click failed with "Could not find node with given id" in CI).
func clickNow(ctx context.Context, selector string) error {
	ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(
		`(() => { const b = document.querySelector(%q); if (!b) return false; b.click(); return true; })()`, selector)))
	if err != nil {
		return fmt.Errorf("click %s: %w", selector, err)
	}
	if !ok {
		return fmt.Errorf("click %s: no such element", selector)
	}
	return nil
}
