package cluster_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/flow/cluster"
	"github.com/rath-run/rath/pkg/llm/llmtest"
	"github.com/rath-run/rath/pkg/session"
)

// startStack starts an in-process coordinator and workers on a fresh
// embedded store; env feeds the workers' model resolution.
func startStack(t *testing.T, workers int, env map[string]string) *client.Client {
	t.Helper()
	dir := t.TempDir()
	return startStackOn(t, "sqlite:"+filepath.Join(dir, "rath.db"), workers, env)
}

// startStackOn is startStack on the store at storeURL.
func startStackOn(t *testing.T, storeURL string, workers int, env map[string]string) *client.Client {
	t.Helper()
	dir := t.TempDir()
	d, err := app.StartDev(context.Background(), app.DevConfig{
		Dir: dir, Addr: "127.0.0.1:0", StoreURL: storeURL,
		Workers: workers, Slots: 8, Getenv: func(k string) string { return env[k] },
	})
	if err != nil {
		t.Fatalf("start stack: %v", err)
	}
	t.Cleanup(d.Close)
	c, err := client.New(d.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func fakeModel(t *testing.T) (*llmtest.Server, map[string]string) {
	srv := llmtest.NewServer(t)
	return srv, map[string]string{"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": srv.URL()}
}

func writer(name string) agent.Spec {
	return agent.Spec{Name: name, Model: "gpt-test", Instructions: "Write one line."}
}

func TestFanOutMergeOnCluster(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fanOutMerge(t, "sqlite:"+filepath.Join(t.TempDir(), "rath.db"))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fanOutMerge(t, testdb.Postgres(t))
	})
}

func fanOutMerge(t *testing.T, storeURL string) {
	srv, env := fakeModel(t)
	srv.Handle(func(r llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Content: "line", Usage: session.Usage{PromptTokens: 5, CompletionTokens: 1, TotalTokens: 6}}
	})
	c := startStackOn(t, storeURL, 2, env)
	ctx := context.Background()
	rt, in, err := cluster.Start(ctx, c, client.WorkflowRequest{Message: "write"})
	if err != nil {
		t.Fatal(err)
	}
	wf := flow.Seq(flow.Fanout(5, flow.NewAgent(writer("w"), "")), flow.NewAgent(writer("editor"), ""))
	out, err := rt.Run(ctx, wf, in)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.GetRun(ctx, rt.RunID())
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "succeeded" || r.Output == nil || *r.Output != out.ID() || r.Kind != "workflow" {
		t.Fatalf("run = %+v", r)
	}
	if len(r.Steps) != 6 {
		t.Fatalf("%d steps, want 6", len(r.Steps))
	}
	for _, st := range r.Steps {
		if st.Status != "committed" || st.Attempts != 1 {
			t.Errorf("step %s: %s after %d attempts", st.Key, st.Status, st.Attempts)
		}
	}
	chunks, err := out.Chunks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ch := range chunks {
		if ch.Kind() == session.KindAssistant {
			n++
		}
	}
	if n != 6 {
		t.Fatalf("%d assistant chunks in the output, want 6 (5 branches merged, then the editor)", n)
	}
	if got := len(srv.Requests()); got != 6 {
		t.Fatalf("%d model requests, want 6", got)
	}
}

// TestRestartedDriverReusesSteps re-executes a finished part of a workflow
// with a second driver on the same run: nothing runs twice.
func TestRestartedDriverReusesSteps(t *testing.T) {
	t.Parallel()
	srv, env := fakeModel(t)
	srv.Handle(func(r llmtest.Request) llmtest.Reply { return llmtest.Reply{Content: "ok"} })
	c := startStack(t, 1, env)
	ctx := context.Background()
	rt, in, err := cluster.Start(ctx, c, client.WorkflowRequest{Message: "go"})
	if err != nil {
		t.Fatal(err)
	}
	first := flow.Fanout(3, flow.NewAgent(writer("w"), ""))
	// The first driver runs the fan-out and "dies" before the last step.
	mid, err := flow.Run(ctx, rt, first, in)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(srv.Requests()); got != 3 {
		t.Fatalf("%d requests after the fan-out", got)
	}
	// A new driver opens the run and re-executes the whole workflow.
	rt2, err := cluster.Open(ctx, c, rt.RunID())
	if err != nil {
		t.Fatal(err)
	}
	in2, err := rt2.Input(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out, err := rt2.Run(ctx, flow.Seq(first, flow.NewAgent(writer("editor"), "")), in2)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(srv.Requests()); got != 4 {
		t.Fatalf("%d model requests in all, want 4 (3 reused + 1)", got)
	}
	// The fan-in merge is keyed: the re-executed fan-out merged to the same
	// version.
	if base := out.Version().Parents[0]; base != mid.ID() {
		t.Fatalf("the last step's input %s, want the first driver's merge %s", out.Version().Parents[0], mid.ID())
	}
}

func TestCancelReachesRunningStep(t *testing.T) {
	t.Parallel()
	srv, env := fakeModel(t)
	started := make(chan struct{}, 1)
	srv.Handle(func(r llmtest.Request) llmtest.Reply {
		started <- struct{}{}
		return llmtest.Reply{Content: "late", Delay: 10 * time.Minute} // ends with the request
	})
	c := startStack(t, 1, env)
	ctx := context.Background()
	rt, in, err := cluster.Start(ctx, c, client.WorkflowRequest{Message: "go"})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := rt.Run(ctx, flow.NewAgent(writer("slow"), ""), in)
		errc <- err
	}()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the model was never called")
	}
	if _, err := c.CancelRun(ctx, rt.RunID()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, cluster.ErrStepCanceled) {
			t.Fatalf("driver error = %v, want ErrStepCanceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the driver did not see the cancel")
	}
	// The worker aborted the model call: the fake server saw the request
	// end (its Delay ends with the request's context).
	r, err := c.GetRun(ctx, rt.RunID())
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "canceled" || len(r.Steps) != 1 || r.Steps[0].Status != "canceled" {
		t.Fatalf("run %s, steps %+v", r.Status, r.Steps)
	}
}

func TestBudgetStopsAcrossSteps(t *testing.T) {
	t.Parallel()
	srv, env := fakeModel(t)
	srv.Handle(func(r llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Content: "x", Usage: session.Usage{PromptTokens: 30, CompletionTokens: 10, TotalTokens: 40}}
	})
	c := startStack(t, 1, env)
	ctx := context.Background()
	rt, in, err := cluster.Start(ctx, c, client.WorkflowRequest{Message: "go", Budget: api.Budget{MaxTokens: 100}})
	if err != nil {
		t.Fatal(err)
	}
	var steps []flow.Workflow
	for i := range 5 {
		steps = append(steps, flow.NewAgent(writer("s"+string(rune('a'+i))), ""))
	}
	_, err = rt.Run(ctx, flow.Seq(steps...), in)
	if err == nil {
		t.Fatal("a workflow of 5 × 40 tokens ran within a budget of 100")
	}
	r, gerr := c.GetRun(ctx, rt.RunID())
	if gerr != nil {
		t.Fatal(gerr)
	}
	if r.Status != "failed" || !strings.Contains(r.Error, "max_tokens 100") {
		t.Fatalf("run %s: %q", r.Status, r.Error)
	}
	// 40 + 40 + 40 ≥ 100: the fourth step is refused before it runs.
	if got := len(srv.Requests()); got != 3 {
		t.Fatalf("%d model requests, want 3", got)
	}
}

func TestDeadlineTimesOutRun(t *testing.T) {
	t.Parallel()
	srv, env := fakeModel(t)
	srv.Handle(func(r llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Content: "slow", Delay: 10 * time.Minute}
	})
	c := startStack(t, 1, env)
	ctx := context.Background()
	rt, in, err := cluster.Start(ctx, c, client.WorkflowRequest{Message: "go", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = rt.Run(ctx, flow.NewAgent(writer("slow"), ""), in)
	if !errors.Is(err, cluster.ErrStepCanceled) {
		t.Fatalf("driver error = %v", err)
	}
	r, err := c.GetRun(ctx, rt.RunID())
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "timed_out" || r.Steps[0].Status != "canceled" {
		t.Fatalf("run %s, step %s", r.Status, r.Steps[0].Status)
	}
}
