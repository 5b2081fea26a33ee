package coordinator_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/bus/embedded"
	"github.com/rath-run/rath/internal/coordinator"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/internal/worker"
)

// TestResumedDriverStaysInTheRunTrace: a workflow run's driver is stopped
// with its first step published (no worker runs it); another coordinator,
// with a tracer provider of its own (another process), resumes the run.
// The resumed drive and the steps both coordinators published are in the
// run's one trace, below the run span the first recorded at submission.
func TestResumedDriverStaysInTheRunTrace(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ns, err := embedded.Start(ctx, embedded.Options{StoreDir: filepath.Join(dir, "nats"), Port: -1, InProcess: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	b, err := app.OpenBackend(ctx, app.BackendConfig{
		StoreURL: "sqlite:" + filepath.Join(dir, "rath.db"),
		Connect:  func() (*nats.Conn, error) { return ns.Connect(nats.Name("trace-test")) },
		Migrate:  true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })

	exp1, exp2 := tracetest.NewInMemoryExporter(), tracetest.NewInMemoryExporter()
	tp1 := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp1))
	tp2 := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp2))
	const wf = "agents:\n  a: {model: scripted, script: [first]}\n  b: {model: scripted, script: [unused, second]}\nsteps:\n  - fork: {branches: [a, b]}\n"
	cfg := coordinator.Config{Name: "one", LeaseTTL: time.Hour, ReconcileInterval: time.Hour, TracerProvider: tp1}
	one, err := coordinator.New(b.Store, b.Runs, b.Bus, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := one.Submit(ctx, coordinator.SubmitRequest{Workflow: wf, Message: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if r.TraceContext == "" || r.Conversation != r.Input.String() {
		t.Fatalf("submitted run: trace_context %q, conversation %q (input %s)", r.TraceContext, r.Conversation, r.Input)
	}
	if err := one.Services().Start(ctx); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the first driver to publish the branches", func() bool {
		n := 0
		for _, s := range exp1.GetSpans() {
			if strings.HasPrefix(s.Name, "publish ") {
				n++
			}
		}
		return n == 2
	})
	stopWithin(t, one.Services(), 30*time.Second)

	cfg.Name, cfg.TracerProvider = "two", tp2
	two, err := coordinator.New(b.Store, b.Runs, b.Bus, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := two.Services().Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer stopWithin(t, two.Services(), 30*time.Second)
	w, err := app.NewWorker(ctx, b, func(string) string { return "" },
		worker.Config{Name: "w", FetchWait: 200 * time.Millisecond, TracerProvider: tp2})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stopWorker := context.WithCancel(ctx)
	workerDone := make(chan struct{})
	go func() { defer close(workerDone); _ = w.Run(wctx) }()
	defer func() { stopWorker(); <-workerDone }()
	testenv.Eventually(t, 60*time.Second, "the resumed run to finish", func() bool {
		got, err := b.Runs.Get(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Terminal() && got.Status != runs.RunSucceeded {
			t.Fatalf("resumed run: %s: %s", got.Status, got.Error)
		}
		return got.Status == runs.RunSucceeded
	})
	// A worker's span of a step ends after the step's commit, which may
	// be after the run has succeeded: wait for both steps' spans too.
	testenv.Eventually(t, 30*time.Second, "the resumed drive's span and both steps'", func() bool {
		drive, process := 0, 0
		for _, s := range exp2.GetSpans() {
			switch {
			case s.Name == "drive workflow":
				drive++
			case strings.HasPrefix(s.Name, "process "):
				process++
			}
		}
		return drive >= 1 && process >= 2
	})

	spans := append(exp1.GetSpans(), exp2.GetSpans()...)
	var runSpan tracetest.SpanStub
	for _, s := range spans {
		if s.Name == "run workflow" {
			runSpan = s
		}
	}
	if !runSpan.SpanContext.IsValid() {
		t.Fatal("no run workflow span")
	}
	byID := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		byID[s.SpanContext.SpanID().String()] = s
	}
	under := func(s tracetest.SpanStub) bool {
		for {
			if s.Parent.SpanID() == runSpan.SpanContext.SpanID() {
				return true
			}
			p, ok := byID[s.Parent.SpanID().String()]
			if !ok {
				return false
			}
			s = p
		}
	}
	counts := map[string]int{}
	for _, s := range spans {
		if s.SpanContext.TraceID() != runSpan.SpanContext.TraceID() {
			t.Errorf("span %q is in trace %s, want the run's %s", s.Name, s.SpanContext.TraceID(), runSpan.SpanContext.TraceID())
		}
		if s.Name != "run workflow" && !under(s) {
			t.Errorf("span %q (parent %s) is not below the run span", s.Name, s.Parent.SpanID())
		}
		counts[strings.Fields(s.Name)[0]+" "+strings.Join(strings.Fields(s.Name)[1:2], "")]++
	}
	// Two drives (the first, the resume), the branches' publishes (the
	// resume finds them put and does not publish again), the forks and
	// the merge the resumed drive commits, two steps on the worker.
	for name, want := range map[string]int{"drive workflow": 2, "process rath.jobs.default": 2, "invoke_agent a": 1, "invoke_agent b": 1} {
		if counts[name] != want {
			t.Errorf("%d %q spans, want %d (all: %v)", counts[name], name, want, counts)
		}
	}
	if counts["store commit"] < 3 {
		t.Errorf("%d store commit spans, want the forks, the merge and the steps' commits (all: %v)", counts["store commit"], counts)
	}
}
