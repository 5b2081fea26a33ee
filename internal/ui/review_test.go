package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/worker"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/tool"
	"github.com/rath-run/rath/pkg/tool/builtin"
)

// invoiceTool counts its executions; not declared idempotent, so a call
// started without a recorded result is ambiguous.
type invoiceTool struct{ runs *atomic.Int64 }

func (invoiceTool) Def() tool.Def {
	return tool.Def{Name: "send_invoice", Description: "sends an invoice",
		Parameters: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"},"eur":{"type":"number"}},"additionalProperties":false}`)}
}
func (invoiceTool) ResourceKey(json.RawMessage) string { return "invoices" }
func (t invoiceTool) Call(context.Context, tool.Env, json.RawMessage) (any, error) {
	t.runs.Add(1)
	return map[string]any{"sent": true}, nil
}

// setAndClick sets the value of the field selector finds, then clicks the
// button button finds, in one step in the page (see clickNow).
func setAndClick(ctx context.Context, field, value, button string) error {
	ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(
		`(() => { const f = document.querySelector(%q), b = document.querySelector(%q); if (!f || !b) return false; f.value = %q; b.click(); return true; })()`,
		field, button, value)))
	if err != nil {
		return fmt.Errorf("set %s, click %s: %w", field, button, err)
	}
	if !ok {
		return fmt.Errorf("set %s, click %s: no such element", field, button)
	}
	return nil
}

// TestBrowserNeedsReview: a worker dies between the start of a
// non-idempotent call and its result (its step goroutine exits, as
// internal/worker's kill-point tests do); the redelivery stops the run in
// needs_review. The open run page turns to it on the run.needs_review
// event: the box names the step, the call (tool, id, arguments, round,
// worker) and the rathctl review commands; the runs list shows the status.
// The page refuses a skip without valid JSON and a fail without a reason
// before sending anything; the Retry button decides, and the page follows
// the run to its end, the call run once.
func TestBrowserNeedsReview(t *testing.T) {
	bctx := browserAt(t, 150*time.Second)
	ctx := context.Background()
	dir := t.TempDir()
	d, err := app.StartDev(ctx, app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", Workers: -1, StoreURL: "sqlite:" + filepath.Join(dir, "rath.db"),
		Bus: bus.Config{AckWait: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)

	var invoices atomic.Int64
	reg := builtin.NewRegistry()
	if err := reg.Register(invoiceTool{&invoices}); err != nil {
		t.Fatal(err)
	}
	var crashed atomic.Bool
	wctx, stopWorker := context.WithCancel(ctx)
	w, err := app.NewWorker(wctx, d.Backend, func(string) string { return "" }, worker.Config{
		Name: "billing-worker", Queue: "billing", Slots: 2, Tools: reg, Heartbeat: 500 * time.Millisecond, ShutdownTimeout: 5 * time.Second,
		CrashAt: func(point string, _ int) {
			if point == worker.CrashToolStarted && crashed.CompareAndSwap(false, true) {
				runtime.Goexit() // the step dies here; the job comes back after AckWait
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(wctx) }()
	t.Cleanup(func() { stopWorker(); <-done })

	// The run is created and published as the coordinator would; its
	// tool is one only this worker has (the dev coordinator's submit
	// check knows the built-ins only).
	in, err := session.FromUserMessage(ctx, d.Backend.Store, "Invoice ACME for March.")
	if err != nil {
		t.Fatal(err)
	}
	script := []llm.ScriptReply{
		{Content: "Sending the invoice.", ToolCalls: []session.ToolCall{{ID: "call_invoice", Type: "function",
			Function: session.FunctionCall{Name: "send_invoice", Arguments: `{"to":"acme@example.com","eur":1200}`}}}},
		{Content: "Invoice sent."},
	}
	target, err := json.Marshal(agent.Spec{Name: "biller", Model: "scripted", Tools: []string{"send_invoice"}, Script: script})
	if err != nil {
		t.Fatal(err)
	}
	r := runs.Run{ID: runs.NewRunID(), Queue: "billing", Target: target, Input: in.ID()}
	if err := d.Backend.Runs.Create(ctx, &r, []runs.Step{{Input: in.ID()}}); err != nil {
		t.Fatal(err)
	}
	stepID := r.Steps[0].ID
	submitted, _ := json.Marshal(map[string]any{"input": in.ID(), "agent": "biller"})
	if err := d.Backend.Bus.PublishEvent(ctx, bus.Event{RunID: r.ID, Type: "run.submitted", Data: submitted}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Backend.Bus.Publish(ctx, bus.Job{StepID: stepID, RunID: r.ID, Queue: r.Queue, Input: in.ID().String(), Target: target}, nil); err != nil {
		t.Fatal(err)
	}

	// The page is open before the run needs a review: the box comes with
	// the run.needs_review event (the run page does not poll).
	review := `#waiting .review-call[data-call="call_invoice"]`
	if err := chromedp.Do(bctx,
		chromedp.Navigate(d.URL+"/ui/#/run/"+r.ID),
		chromedp.WaitVisible(chromedp.CSS(`#run-meta`)),
		chromedp.WaitVisible(chromedp.CSS(review)),
		chromedp.WaitVisible(chromedp.CSS(`#status.needs_review`)),
		chromedp.WaitVisible(chromedp.CSS(`#events li[data-type="run.needs_review"]`)),
		chromedp.WaitVisible(chromedp.CSS(`svg#graph g.node.live.needs_review`)),
	); err != nil {
		t.Fatalf("needs_review on the run page: %v", err)
	}
	if !crashed.Load() {
		t.Fatal("the worker never died at the call's start")
	}
	box, err := textOf(bctx, `#waiting`)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Needs review", "Step " + r.Steps[0].Key, "send_invoice", "call_invoice", `{"to":"acme@example.com","eur":1200}`, "round 1", "billing-worker",
		"rathctl review " + r.ID + " --retry",
		"rathctl review " + r.ID + " --skip --result '{…}'",
		"rathctl review " + r.ID + " --fail --reason '…'",
	} {
		if !strings.Contains(box, want) {
			t.Errorf("needs_review box:\n%s\nwant %q", box, want)
		}
	}
	if n := invoices.Load(); n != 0 {
		t.Fatalf("send_invoice ran %d times before the review, want 0", n)
	}
	viewShot(bctx, t, "ui-needs-review")

	// The runs list shows the status.
	if err := chromedp.Do(bctx,
		chromedp.Navigate(d.URL+"/ui/#/"),
		chromedp.WaitVisible(chromedp.CSS(`#runs tr[data-run="`+r.ID+`"] .status.needs_review`)),
	); err != nil {
		t.Fatalf("runs list: %v", err)
	}

	// Back on the run page: a skip needs valid JSON, a fail a reason;
	// neither is sent without.
	if err := chromedp.Do(bctx,
		chromedp.Navigate(d.URL+"/ui/#/run/"+r.ID),
		chromedp.WaitVisible(chromedp.CSS(review+` button[data-decision="retry"]`)),
	); err != nil {
		t.Fatalf("run page again: %v", err)
	}
	msg := func() string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector("#waiting .review-msg").textContent`))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if err := setAndClick(bctx, review+` textarea.result`, `{"sent": tru`, review+` button[data-decision="skip"]`); err != nil {
		t.Fatal(err)
	}
	if got := msg(); !strings.Contains(got, "result: not valid JSON") {
		t.Errorf("skip with bad JSON says %q", got)
	}
	if err := setAndClick(bctx, review+` input.reason`, "  ", review+` button[data-decision="fail"]`); err != nil {
		t.Fatal(err)
	}
	if got := msg(); !strings.Contains(got, "reason: required") {
		t.Errorf("fail without a reason says %q", got)
	}
	if ps, err := d.Backend.Runs.PendingReviews(ctx, r.ID); err != nil || len(ps) != 1 {
		t.Fatalf("after refused decisions: %+v, %v; want the call still pending", ps, err)
	}

	// Retry: the call runs again, once, and the run goes on to its end.
	if err := clickNow(bctx, review+` button[data-decision="retry"]`); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx,
		chromedp.WaitVisible(chromedp.CSS(`#status.succeeded`)),
		chromedp.WaitNotVisible(chromedp.CSS(`#waiting`)),
		chromedp.WaitVisible(chromedp.CSS(`#events li[data-type="review.decided"]`)),
		chromedp.WaitVisible(chromedp.CSS(`svg#graph g.node.output`)),
	); err != nil {
		t.Fatalf("after the retry: %v", err)
	}
	if n := invoices.Load(); n != 1 {
		t.Errorf("send_invoice ran %d times, want 1 (the retry)", n)
	}
	final, err := d.Backend.Runs.Get(ctx, r.ID)
	if err != nil || final.Status != runs.RunSucceeded || final.Output == nil {
		t.Fatalf("run %+v: %v", final, err)
	}
	out, err := session.Open(ctx, d.Backend.Store, *final.Output)
	if err != nil {
		t.Fatal(err)
	}
	var decided *agent.Review
	for _, c := range out.Version().Chunks {
		if c.Kind() == session.KindReview {
			rv, err := agent.ParseReview(c.Payload())
			if err != nil {
				t.Fatal(err)
			}
			decided = &rv
		}
	}
	if decided == nil || decided.Decision != agent.ReviewRetry || decided.CallID != "call_invoice" {
		t.Fatalf("review chunk %+v, want retry of call_invoice", decided)
	}
}
