package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/llm/llmtest"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// modelCounter is a fake OpenAI endpoint the cluster's workers call; it
// counts requests per agent (the agent's instructions name it) and answers
// after the agent's delay.
type modelCounter struct {
	srv    *llmtest.Server
	mu     sync.Mutex
	counts map[string]int
	// reply, when set before the first request, answers agent's n-th
	// request (from 1) instead of "reply from AGENT".
	reply func(agent string, n int) string
}

func newModelCounter(t *testing.T, delays map[string]time.Duration) *modelCounter {
	m := &modelCounter{srv: llmtest.NewServer(t), counts: map[string]int{}}
	m.srv.Handle(func(r llmtest.Request) llmtest.Reply {
		agent := "?"
		for _, msg := range r.Messages {
			if msg.Role == "system" && msg.Content != nil {
				agent = strings.Fields(*msg.Content)[0]
			}
		}
		m.mu.Lock()
		m.counts[agent]++
		content := "reply from " + agent
		if m.reply != nil {
			content = m.reply(agent, m.counts[agent])
		}
		m.mu.Unlock()
		return llmtest.Reply{Content: content, Delay: delays[agent],
			Usage: session.Usage{PromptTokens: 10, CompletionTokens: 2, TotalTokens: 12}}
	})
	return m
}

func (m *modelCounter) count(agent string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts[agent]
}

// total is the requests counted for every agent.
func (m *modelCounter) total() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, k := range m.counts {
		n += k
	}
	return n
}

func (m *modelCounter) env() []string {
	return []string{"OPENAI_API_KEY=sk-test", "OPENAI_BASE_URL=" + m.srv.URL()}
}

// submitWorkflow writes a workflow file and submits it with `rathctl run`.
func (c *cluster) submitWorkflow(yaml, message string) runs.Run {
	c.t.Helper()
	path := filepath.Join(c.dir, fmt.Sprintf("workflow-%d.yaml", time.Now().UnixNano()))
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		c.t.Fatal(err)
	}
	out, err := c.rathctl("run", path, "--message", message, "-o", "json")
	if err != nil {
		c.t.Fatal(err)
	}
	var r runs.Run
	if err := json.Unmarshal(out, &r); err != nil {
		c.t.Fatalf("rathctl run output %q: %v", out, err)
	}
	return r
}

// checkOncePerStep asserts every step committed after one attempt, and
// that the graph holds exactly one version keyed by each step.
func (c *cluster) checkOncePerStep(g store.Store, r runs.Run) {
	c.t.Helper()
	ctx := context.Background()
	for _, st := range r.Steps {
		if st.Status != runs.StepCommitted || st.Attempts != 1 {
			c.t.Errorf("step %s: %s after %d attempts", st.Key, st.Status, st.Attempts)
		}
		v, err := g.GetByKey(ctx, st.ID)
		if err != nil || st.Output == nil || v.ID != *st.Output {
			c.t.Errorf("version keyed by %s = %v, %v; want the step's output", st.ID, v, err)
		}
	}
}

// TestWorkflowFanOut100 runs a declarative fan-out of 100 branches with
// its merge, then one more step, across 2 worker processes.
func TestWorkflowFanOut100(t *testing.T) {
	t.Parallel()
	m := newModelCounter(t, map[string]time.Duration{"BRANCH": 20 * time.Millisecond})
	c := newCluster(t, clusterConfig{workers: 2, workerArgs: []string{"--slots", "8"}, env: m.env()})
	r := c.submitWorkflow(`
agents:
  branch: {model: gpt-test, instructions: BRANCH answer briefly}
  summary: {model: gpt-test, instructions: SUMMARY of all answers}
steps:
  - fork: {n: 100, agent: branch}
  - agent: summary
`, "fan out")
	r = c.waitRun(r.ID, 120*time.Second, "an end", func(r runs.Run) bool { return r.Status.Terminal() })
	if r.Status != runs.RunSucceeded {
		t.Fatalf("run %s: %s", r.Status, r.Error)
	}
	if len(r.Steps) != 101 {
		t.Fatalf("%d steps, want 101", len(r.Steps))
	}
	g := c.graph()
	c.checkOncePerStep(g, r)
	by := map[string]int{}
	for _, st := range r.Steps {
		by[st.Worker]++
	}
	if by["w1"] == 0 || by["w2"] == 0 {
		t.Errorf("steps per worker %v: want both workers used", by)
	}
	if m.count("BRANCH") != 100 || m.count("SUMMARY") != 1 {
		t.Fatalf("model requests: %d branch, %d summary; want 100 and 1", m.count("BRANCH"), m.count("SUMMARY"))
	}
	ctx := context.Background()
	cs, err := g.Transcript(ctx, *r.Output)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ch := range cs {
		if ch.Kind() == session.KindAssistant && ch.Text() == "reply from BRANCH" {
			n++
		}
	}
	if n != 100 || cs[len(cs)-1].Text() != "reply from SUMMARY" {
		t.Fatalf("output has %d branch replies (want 100) and ends %q", n, cs[len(cs)-1].Text())
	}
	// The summary's input is the last of the fan-in merges.
	last := r.Steps[len(r.Steps)-1]
	in, err := g.Get(ctx, last.Input)
	if err != nil {
		t.Fatal(err)
	}
	if in.Op != session.OpMerge {
		t.Fatalf("summary input: op %s, want a merge", in.Op)
	}
}

// TestWorkflowCoordinatorKilled SIGKILLs the coordinator driving a
// workflow while a step runs, and starts a new one: it takes the driving
// over, the run finishes, and no step ran twice.
func TestWorkflowCoordinatorKilled(t *testing.T) {
	t.Parallel()
	m := newModelCounter(t, map[string]time.Duration{"SLOW": 3 * time.Second})
	c := newCluster(t, clusterConfig{workers: 2, coordArgs: []string{"--reconcile-interval", "1s"}, env: m.env()})
	r := c.submitWorkflow(`
agents:
  fast: {model: gpt-test, instructions: FAST drafts}
  slow: {model: gpt-test, instructions: SLOW review}
  last: {model: gpt-test, instructions: LAST words}
steps:
  - fork: {n: 4, agent: fast}
  - agent: slow
  - agent: last
`, "survive the driver")
	c.waitRun(r.ID, 60*time.Second, "the slow step running", func(r runs.Run) bool {
		return len(r.Steps) == 5 && r.Steps[4].Status == runs.StepRunning
	})
	c.coord.kill(t)
	c.coord.start(t)
	c.waitReady()
	r = c.waitRun(r.ID, 90*time.Second, "an end", func(r runs.Run) bool { return r.Status.Terminal() })
	if r.Status != runs.RunSucceeded {
		t.Fatalf("run %s: %s", r.Status, r.Error)
	}
	if len(r.Steps) != 6 {
		t.Fatalf("%d steps, want 6", len(r.Steps))
	}
	c.checkOncePerStep(c.graph(), r)
	if m.count("FAST") != 4 || m.count("SLOW") != 1 || m.count("LAST") != 1 {
		t.Fatalf("model requests fast %d, slow %d, last %d; want 4, 1, 1", m.count("FAST"), m.count("SLOW"), m.count("LAST"))
	}
}

// TestWorkflowSelectorLoopBinaries runs the triage example (a selector
// loop) on the real binaries.
func TestWorkflowSelectorLoopBinaries(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterConfig{workers: 1})
	triage, err := filepath.Abs(filepath.Join("..", "examples", "workflows", "triage.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.rathctl("run", triage, "--message", "I was charged twice.", "--watch")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "succeeded") {
		t.Fatalf("output:\n%s", out)
	}
}

// TestWorkflowStepPublishedWhenNATSReturns stops NATS while a workflow's
// first step runs, so that the coordinator records the second step while
// its job cannot be published, and keeps NATS down until the publish has
// timed out. The job waits in the coordinator's NATS client and reaches the
// stream when NATS is back (its message id dedupes any republish): the
// second step runs within seconds, not when the reconciler finds it stale
// (--stale-after, 2 minutes by default, which this cluster keeps).
func TestWorkflowStepPublishedWhenNATSReturns(t *testing.T) {
	t.Parallel()
	m := newModelCounter(t, map[string]time.Duration{"FIRST": 2 * time.Second})
	c := newCluster(t, clusterConfig{workers: 1, env: m.env()})
	r := c.submitWorkflow(`
agents:
  first: {model: gpt-test, instructions: FIRST step}
  second: {model: gpt-test, instructions: SECOND step}
steps:
  - agent: first
  - agent: second
`, "outlive the outage")
	c.waitRun(r.ID, 60*time.Second, "the first step running", func(r runs.Run) bool {
		return len(r.Steps) == 1 && r.Steps[0].Status == runs.StepRunning
	})
	c.stopNATS()
	c.waitRun(r.ID, 60*time.Second, "the second step recorded while NATS is down", func(r runs.Run) bool {
		return len(r.Steps) == 2 && r.Steps[0].Status == runs.StepCommitted
	})
	c.waitFor("the coordinator's publish of the second step to time out", 60*time.Second, func() bool {
		return strings.Contains(c.coord.output(), "publish failed")
	})
	c.startNATS()
	back := time.Now()
	r = c.waitRun(r.ID, 90*time.Second, "an end", func(r runs.Run) bool { return r.Status.Terminal() })
	if r.Status != runs.RunSucceeded {
		t.Fatalf("run %s: %s", r.Status, r.Error)
	}
	if took := time.Since(back); took > 20*time.Second {
		t.Errorf("the run ended %s after NATS came back, want the second step run within seconds", took.Round(time.Second))
	}
	if m.count("FIRST") != 1 || m.count("SECOND") != 1 {
		t.Errorf("model requests first %d, second %d; want 1 each", m.count("FIRST"), m.count("SECOND"))
	}
}
