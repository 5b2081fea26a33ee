package worker_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/worker"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
)

// TestWorkerFailsBadModelPermanently publishes jobs whose targets name a
// model no coordinator would accept (a foreign publisher, or a target
// recorded before the check): the worker fails each step permanently on
// its first delivery, naming the model field, and never resolves the
// model (so never opens a path).
func TestWorkerFailsBadModelPermanently(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	var resolved atomic.Int32
	cons, err := r.bus.Consumer(ctx, bus.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(r.graph, r.runs, cons, r.bus, func(agent.Spec) (llm.Provider, string, error) {
		resolved.Add(1)
		return &llm.Scripted{Replies: []llm.ScriptReply{{Content: "x"}}}, "scripted", nil
	}, worker.Config{Name: "models-worker", Slots: 1, MaxDeliver: r.bus.Config().MaxDeliver, FetchWait: 200 * time.Millisecond, ShutdownTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)

	for _, c := range []struct{ target, want string }{
		{`{"name":"a","model":"scripted:/etc/hostname"}`, "model: \"scripted:/etc/hostname\""},
		{`{"name":"a","model":"` + strings.Repeat("x", 200_000) + `"}`, "model: 200000 bytes, over the 128-byte limit"},
		{`{"kind":"select","agent":{"name":"a","model":"scripted:../pipe"},"candidates":["x"]}`, "not a path"},
	} {
		in, err := session.FromUserMessage(ctx, r.graph, "hi")
		if err != nil {
			t.Fatal(err)
		}
		run := runs.Run{ID: runs.NewRunID(), Queue: bus.DefaultQueue, Target: []byte(c.target), Input: in.ID()}
		if err := r.runs.Create(ctx, &run, []runs.Step{{Input: in.ID()}}); err != nil {
			t.Fatal(err)
		}
		st := run.Steps[0]
		if _, err := r.bus.Publish(ctx, bus.Job{StepID: st.ID, RunID: run.ID, Queue: run.Queue, Input: in.ID().String(), Target: []byte(c.target)}, nil); err != nil {
			t.Fatal(err)
		}
		got := r.waitRun(t, run.ID)
		if got.Status != runs.RunFailed || !strings.Contains(got.Error, c.want) || got.Steps[0].Attempts != 1 || len(got.Error) > 1024 {
			t.Errorf("target %.60s: run %s after %d attempts, error %.300q; want failed once naming %q", c.target, got.Status, got.Steps[0].Attempts, got.Error, c.want)
		}
	}
	if n := resolved.Load(); n != 0 {
		t.Errorf("the worker resolved %d bad models", n)
	}
}
