package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rath-run/rath/internal/app/apptest"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/internal/worker"
	"github.com/rath-run/rath/pkg/client"
)

// fanout writes a file with a tool, then forks into two agents whose
// outputs are merged: input, scribe, two forks, critic, editor, merge.
const fanout = `
version: 1
name: fanout
agents:
  scribe:
    model: scripted
    tools: [builtin]
    script:
      - {content: "Writing the plan.", tool_calls: [{id: call_plan, function: {name: write_workspace_file, arguments: {path: plan.md, content: "Day 1: Fushimi Inari"}}}]}
      - Saved plan.md.
  critic:
    model: scripted
    script: [unused, unused, "The plan needs a day 2."]
  editor:
    model: scripted
    script: [unused, unused, "Tightened the wording."]
steps:
  - agent: scribe
  - fork: {branches: [critic, editor]}
`

const liveAgent = `{"name":"late","model":"scripted","script":[{"content":"answered while you watched"}]}`

// TestBrowser drives the web UI in headless Chromium against a live dev
// stack: the runs list, the graph of a fork/merge run (node count), a
// node's chunks and files, and a run page that follows a run over SSE.
func TestBrowser(t *testing.T) {
	exe := testenv.RequireChromium(t)
	ctx := context.Background()
	dir := t.TempDir()
	d := apptest.Dev(t, dir)
	cl, err := client.New(d.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	r1, err := cl.StartWorkflow(ctx, client.WorkflowRequest{Workflow: fanout, Message: "Plan a trip to Kyoto."})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "the fan-out run to end", func() bool {
		if r1, err = cl.GetRun(ctx, r1.ID); err != nil {
			t.Fatal(err)
		}
		return r1.Terminal()
	})
	if r1.Status != "succeeded" {
		t.Fatalf("fan-out run %s: %s", r1.Status, r1.Error)
	}
	var graph struct {
		Nodes []struct {
			ID    string `json:"id"`
			Op    string `json:"op"`
			Agent string `json:"agent"`
		} `json:"nodes"`
	}
	if err := cl.Do(ctx, "GET", "/v1/runs/"+r1.ID+"/graph?format=json", nil, &graph); err != nil {
		t.Fatal(err)
	}
	var scribe string
	ops := map[string]int{}
	for _, n := range graph.Nodes {
		ops[n.Op]++
		if n.Agent == "scribe" {
			scribe = n.ID
		}
	}
	if len(graph.Nodes) != 7 || ops["fork"] != 2 || ops["merge"] != 1 || scribe == "" {
		t.Fatalf("run graph has %d nodes %v, want 7: input, scribe, 2 forks, critic, editor, merge", len(graph.Nodes), ops)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.WindowSize(1400, 900))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to sandbox as root
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	if err := chromedp.Do(browser); err != nil { // starts the browser; no timeout on this context
		t.Fatalf("start Chromium: %v", err)
	}
	bctx, cancel := context.WithTimeout(browser, 90*time.Second)
	defer cancel()
	css := func(sel string, args ...any) chromedp.CSS { return chromedp.CSS(fmt.Sprintf(sel, args...)) }

	// The runs list shows the run.
	if err := chromedp.Do(bctx,
		chromedp.Navigate(d.URL+"/ui/"),
		chromedp.WaitVisible(css(`#runs tr[data-run=%q]`, r1.ID)),
	); err != nil {
		t.Fatalf("runs list: %v", err)
	}

	// Its usage is the output's.
	var out struct {
		Usage struct {
			TotalTokens int64 `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := cl.Do(ctx, "GET", "/v1/sessions/"+r1.Output.String(), nil, &out); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx, chromedp.WaitVisible(css(`#runs tr[data-run=%q] td.tokens:not(:empty)`, r1.ID))); err != nil {
		t.Fatalf("runs list usage: %v", err)
	}
	tokens, err := chromedp.Run(bctx, chromedp.Text(css(`#runs tr[data-run=%q] td.tokens`, r1.ID)))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprint(out.Usage.TotalTokens); tokens != want || want == "0" {
		t.Errorf("runs list shows %q tokens, want %s", tokens, want)
	}

	// The run page draws one SVG node per version.
	if err := chromedp.Do(bctx,
		chromedp.Navigate(d.URL+"/ui/#/run/"+r1.ID),
		chromedp.WaitVisible(css(`svg#graph g.node`)),
	); err != nil {
		t.Fatalf("run page: %v", err)
	}
	nodes, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("svg#graph g.node").length`))
	if err != nil {
		t.Fatal(err)
	}
	if nodes != len(graph.Nodes) {
		t.Fatalf("the graph shows %d nodes, want %d", nodes, len(graph.Nodes))
	}

	// Clicking the scribe's version shows its chunks: the tool call, its
	// result, the reply; and the file it wrote.
	if err := chromedp.Do(bctx,
		chromedp.Click(css(`svg#graph g.node[data-id=%q]`, scribe)),
		chromedp.WaitVisible(css(`#chunks .chunk[data-kind="tool_result"]`)),
		chromedp.WaitVisible(css(`#files table`)),
	); err != nil {
		t.Fatalf("version panel: %v", err)
	}
	chunks, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#chunks .chunk")].map(c => c.dataset.kind + ": " + c.innerText.replace(/\s+/g, " "))`))
	if err != nil {
		t.Fatal(err)
	}
	files, err := chromedp.Run(bctx, chromedp.Text(css(`#files`)))
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(chunks, "\n")
	for _, want := range []string{"Writing the plan.", "→ write_workspace_file", "call_plan", "← write_workspace_file", "bytes_written", "Saved plan.md."} {
		if !strings.Contains(joined, want) {
			t.Errorf("chunks shown:\n%s\nwant %q", joined, want)
		}
	}
	if !strings.Contains(files, "plan.md") {
		t.Errorf("files panel %q lacks plan.md", files)
	}
	shot(bctx, t, "rath-ui-run")

	// Live: a run on a queue no worker serves yet stays pending while its
	// page is open; a worker then runs it, and the page follows over SSE.
	var r2 runs.Run
	if err := cl.Do(ctx, "POST", "/v1/runs", map[string]any{"agent": json.RawMessage(liveAgent), "message": "Anyone there?", "queue": "later"}, &r2); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx,
		chromedp.Navigate(d.URL+"/ui/#/run/"+r2.ID),
		chromedp.WaitVisible(css(`#status`)),
	); err != nil {
		t.Fatalf("live run page: %v", err)
	}
	status, err := chromedp.Run(bctx, chromedp.Text(css(`#status`)))
	if err != nil {
		t.Fatal(err)
	}
	if status != "pending" {
		t.Fatalf("live run shows %q before any worker serves its queue, want pending", status)
	}
	runWorker(t, d, nil, worker.Config{Name: "late-worker", Queue: "later", ShutdownTimeout: 5 * time.Second})
	if err := chromedp.Do(bctx,
		chromedp.WaitVisible(css(`#events li[data-type="step.committed"]`)),
		chromedp.WaitVisible(css(`#events li[data-type="run.completed"]`)),
		chromedp.WaitVisible(css(`#status.succeeded`)),
		chromedp.WaitVisible(css(`svg#graph g.node`)),
	); err != nil {
		t.Fatalf("live updates: %v", err)
	}
	shot(bctx, t, "rath-ui-live")
}

// shot saves a full-page screenshot under $RATH_ARTIFACTS (default the OS
// temp dir) and logs its path.
func shot(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	dir := os.Getenv("RATH_ARTIFACTS")
	if dir == "" {
		dir = os.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
