package app_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/llm/llmtest"
	"github.com/rath-run/rath/pkg/session"
)

// waitClientRun polls a run until it ends.
func waitClientRun(t *testing.T, c *client.Client, id string) api.Run {
	t.Helper()
	var r api.Run
	testenv.Eventually(t, 60*time.Second, "run "+id+" to end", func() bool {
		var err error
		if r, err = c.GetRun(context.Background(), id); err != nil {
			t.Fatalf("get run: %v", err)
		}
		return r.Terminal()
	})
	return r
}

// TestDeclarativeSelectorLoop runs examples/workflows/triage.yaml (a
// selector loop over two agents, scripted models) driven by the
// coordinator.
func TestDeclarativeSelectorLoop(t *testing.T) {
	t.Parallel()
	yaml, err := os.ReadFile(filepath.Join("..", "..", "examples", "workflows", "triage.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := startDev(t, "", app.DevConfig{Workers: 1})
	ctx := context.Background()
	r, err := s.cl.StartWorkflow(ctx, client.WorkflowRequest{Workflow: string(yaml), Message: "I was charged twice."})
	if err != nil {
		t.Fatal(err)
	}
	r = waitClientRun(t, s.cl, r.ID)
	if r.Status != "succeeded" {
		t.Fatalf("run %s: %s", r.Status, r.Error)
	}
	// router → billing → router → writer → router (-1).
	if len(r.Steps) != 5 {
		t.Fatalf("%d steps, want 5: %+v", len(r.Steps), r.Steps)
	}
	if r.Output == nil {
		t.Fatalf("run %s without an output", r.ID)
	}
	outID := *r.Output
	out, err := session.Open(ctx, s.dev.Backend.Store, outID)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := out.Chunks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	last := cs[len(cs)-1]
	var text strings.Builder
	for _, c := range cs {
		text.WriteString(string(c.Kind()) + ": " + c.Text() + "\n")
	}
	if !strings.Contains(text.String(), "We refunded the duplicate charge") || !strings.Contains(text.String(), "was refunded") {
		t.Fatalf("transcript lacks the agents' replies:\n%s (last %s)", text.String(), last.Kind())
	}
}

func TestDeclarativeWorkflowRejected(t *testing.T) {
	t.Parallel()
	s := startDev(t, "", app.DevConfig{Workers: -1})
	_, err := s.cl.StartWorkflow(context.Background(), client.WorkflowRequest{
		Workflow: "agents:\n  a: {model: scripted, script: [x]}\nsteps:\n  - agent: nobody\n", Message: "hi"})
	if err == nil || !strings.Contains(err.Error(), "4:") || !strings.Contains(err.Error(), "nobody") {
		t.Fatalf("error = %v, want the unknown agent with its line", err)
	}
}

const forkThenEdit = `
agents:
  writer: {model: gpt-test, instructions: WRITER}
  editor: {model: gpt-test, instructions: EDITOR}
steps:
  - fork: {n: 3, agent: writer}
  - agent: editor
`

// TestCoordinatorRestartResumesWorkflow stops the whole stack while the
// workflow's last step is running, starts it again on the same state, and
// checks the run finishes without running a finished step twice.
func TestCoordinatorRestartResumesWorkflow(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	var mu sync.Mutex
	counts := map[string]int{}
	release := make(chan struct{})
	editing := make(chan struct{}, 8)
	srv.Handle(func(r llmtest.Request) llmtest.Reply {
		role := "writer"
		for _, m := range r.Messages {
			if m.Role == "system" && m.Content != nil && strings.Contains(*m.Content, "EDITOR") {
				role = "editor"
			}
		}
		mu.Lock()
		counts[role]++
		mu.Unlock()
		if role == "editor" {
			editing <- struct{}{}
			select {
			case <-release:
				return llmtest.Reply{Content: "edited"}
			default:
				return llmtest.Reply{Content: "too early", Delay: 10 * time.Minute}
			}
		}
		return llmtest.Reply{Content: "draft"}
	})
	env := map[string]string{"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": srv.URL()}
	dir := t.TempDir()
	cfg := app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", StoreURL: "sqlite:" + filepath.Join(dir, "rath.db"),
		Workers: 1, Getenv: func(k string) string { return env[k] }}
	ctx := context.Background()
	d1, err := app.StartDev(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c1, _ := client.New(d1.URL, "")
	r, err := c1.StartWorkflow(ctx, client.WorkflowRequest{Workflow: forkThenEdit, Message: "write"})
	if err != nil {
		d1.Close()
		t.Fatal(err)
	}
	select {
	case <-editing:
	case <-time.After(60 * time.Second):
		d1.Close()
		t.Fatal("the editor step never started")
	}
	d1.Close() // the driver dies with the coordinator, mid-step

	close(release)
	d2, err := app.StartDev(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d2.Close)
	c2, _ := client.New(d2.URL, "")
	got := waitClientRun(t, c2, r.ID)
	if got.Status != "succeeded" {
		t.Fatalf("run %s: %s", got.Status, got.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	if counts["writer"] != 3 {
		t.Fatalf("writer called %d times, want 3 (no fork step twice)", counts["writer"])
	}
	if len(got.Steps) != 4 {
		t.Fatalf("%d steps, want 4", len(got.Steps))
	}
	for _, st := range got.Steps {
		if st.Status != "committed" {
			t.Errorf("step %s is %s", st.Key, st.Status)
		}
		if st.Key != got.Steps[len(got.Steps)-1].Key && st.Attempts != 1 {
			t.Errorf("fork step %s ran %d times", st.Key, st.Attempts)
		}
	}
}
