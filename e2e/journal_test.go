package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/worker"
	"github.com/rath-run/rath/pkg/llm/llmtest"
	"github.com/rath-run/rath/pkg/session"
)

// journalModel answers a 5-round tool step: in round i (1–4) it calls
// write_workspace_file to append "line i" to log.txt (the file holds lines
// 1..i), in round 5 it answers. Requests are counted per run message and
// round by requestsPerRound.
func journalModel(t *testing.T) (*llmtest.Server, []string) {
	t.Helper()
	srv := llmtest.NewServer(t)
	srv.Handle(func(r llmtest.Request) llmtest.Reply {
		n := 0
		for _, m := range r.Messages {
			if m.Role == "assistant" {
				n++
			}
		}
		usage := session.Usage{PromptTokens: 10, CompletionTokens: 5}
		if n >= 4 {
			return llmtest.Reply{Content: "done", Usage: usage, Delay: 20 * time.Millisecond}
		}
		var lines strings.Builder
		for i := 1; i <= n+1; i++ {
			fmt.Fprintf(&lines, "line %d\n", i)
		}
		args, _ := json.Marshal(map[string]string{"path": "log.txt", "content": lines.String()})
		return llmtest.Reply{Usage: usage, Delay: 20 * time.Millisecond, ToolCalls: []session.ToolCall{{
			ID: fmt.Sprintf("w%d", n+1), Type: "function",
			Function: session.FunctionCall{Name: "write_workspace_file", Arguments: string(args)},
		}}}
	})
	return srv, []string{"OPENAI_API_KEY=sk-journal-test", "OPENAI_BASE_URL=" + srv.URL(), "OPENAI_DEFAULT_MODEL=fake"}
}

// requestsPerRound counts the model requests for message by round.
func requestsPerRound(srv *llmtest.Server, message string) map[int]int {
	out := map[int]int{}
	for _, r := range srv.Requests() {
		mine, n := false, 1
		for _, m := range r.Messages {
			if m.Role == "user" && m.Content != nil && *m.Content == message {
				mine = true
			}
			if m.Role == "assistant" {
				n++
			}
		}
		if mine {
			out[n]++
		}
	}
	return out
}

// TestJournalWorkerKills kills a real worker process (RATH_TEST_CRASH_AT:
// SIGKILL at a named point) at each point of a 5-round tool step and
// restarts it: the step commits once, with the chunks and the workspace
// snapshot of an uninterrupted run, the fake model sees no repeated
// request for a recorded round, and the dossier shows the resume.
func TestJournalWorkerKills(t *testing.T) {
	srv, env := journalModel(t)
	pol := filepath.Join(t.TempDir(), "sandbox-policy.yaml")
	if err := os.WriteFile(pol, []byte("backends: [local]\ndefault: local\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env = append(env, "RATH_SANDBOX_POLICY="+pol)
	c := newCluster(t, clusterConfig{workers: 1, env: env})
	w := c.workers[0]
	g := c.graph()
	ctx := context.Background()
	spec := filepath.Join(c.dir, "journal-agent.yaml")
	if err := os.WriteFile(spec, []byte("name: journal\nmodel: fake\ntools: [builtin]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		chunks   []string
		snapshot string
		usage    session.Usage
		rounds   map[int]int
	}
	runOnce := func(t *testing.T, message, crash string) outcome {
		t.Helper()
		if crash != "" {
			w.stop(t)
			w.env = append(append([]string(nil), env...), "RATH_TEST_CRASH_AT="+crash)
			w.start(t)
		}
		out, err := c.rathctl("run", "--agent", spec, "--message", message, "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var r struct{ ID string }
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatal(err)
		}
		if crash != "" {
			c.waitFor("the worker to crash at "+crash, 60*time.Second, func() bool { return !w.running() })
			if !strings.Contains(w.output(), "RATH_TEST_CRASH_AT: crashing at") {
				t.Fatalf("the worker exited without crashing at %s", crash)
			}
			w.env = env
			w.start(t)
		}
		run := c.waitSucceeded(r.ID)
		s, err := session.Open(ctx, g, *run.Output)
		if err != nil {
			t.Fatal(err)
		}
		o := outcome{snapshot: s.Placement().Snapshot, usage: s.Usage(), rounds: requestsPerRound(srv, message)}
		for _, ch := range s.Version().Chunks {
			o.chunks = append(o.chunks, ch.Hash())
		}
		if crash != "" && !strings.HasPrefix(crash, worker.CrashAfterCommit) {
			d, err := c.rathctl("dossier", r.ID, "-o", "json")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(d), `"resumes"`) || !strings.Contains(string(d), `"after_round"`) {
				t.Errorf("the dossier shows no resume: %s", tail(string(d), 2000))
			}
		}
		return o
	}
	ref := runOnce(t, "journal reference", "")
	for _, tc := range []struct {
		crash    string
		inflight int // the round whose request is repeated (not recorded)
	}{
		{worker.CrashBeforeReply + ":3", 3},
		{worker.CrashAfterReply + ":3", 0},
		{worker.CrashToolStarted + ":3", 0},
		{worker.CrashToolResult + ":3", 0},
		{worker.CrashBeforeCommit, 0},
		{worker.CrashAfterCommit, 0},
	} {
		t.Run(strings.ReplaceAll(tc.crash, ":", "_round"), func(t *testing.T) {
			got := runOnce(t, "journal "+tc.crash, tc.crash)
			if fmt.Sprint(got.chunks) != fmt.Sprint(ref.chunks) || got.snapshot != ref.snapshot || got.usage != ref.usage {
				t.Fatalf("resumed step committed %v snapshot %s usage %+v;\nuninterrupted %v snapshot %s usage %+v",
					got.chunks, got.snapshot, got.usage, ref.chunks, ref.snapshot, ref.usage)
			}
			for r := 1; r <= 5; r++ {
				want := 1
				if r == tc.inflight {
					want = 2
				}
				if got.rounds[r] != want {
					t.Errorf("round %d: %d model requests, want %d (all: %v)", r, got.rounds[r], want, got.rounds)
				}
			}
		})
	}
}
