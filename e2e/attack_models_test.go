package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/llm/llmtest"
)

// Attacks on the model name (issue #19, findings 3 and 7): a tenant with
// an ordinary submit token chooses the agent's model string. It must never
// name a file on the worker host (scripted:<path>) nor become an unbounded
// metrics label.

// postRun submits req to the coordinator's API as token, bypassing
// rathctl's own checks (an attacker need not use rathctl), and returns the
// status and body.
func (s *secured) postRun(token string, req map[string]any) (int, string) {
	s.t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		s.t.Fatal(err)
	}
	hr, err := http.NewRequest(http.MethodPost, s.server+"/v1/runs", bytes.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	hr.Header.Set("Authorization", "Bearer "+token)
	hr.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(hr)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	return res.StatusCode, string(out)
}

// runID decodes a submitted run's id.
func runID(t *testing.T, body string) string {
	t.Helper()
	var r runs.Run
	if err := json.Unmarshal([]byte(body), &r); err != nil || r.ID == "" {
		t.Fatalf("submit answered %q: want a run", body)
	}
	return r.ID
}

// within polls cond until it holds or timeout passes; unlike
// testenv.Eventually it reports the outcome instead of failing.
func within(timeout time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		if cond() {
			return true
		}
		select {
		case <-deadline.C:
			return cond()
		case <-tick.C:
		}
	}
}

// refusedModel checks a submit was refused with a 400 naming the model field.
func refusedModel(t *testing.T, what string, code int, body string) {
	t.Helper()
	if code != http.StatusBadRequest || !strings.Contains(body, "model") {
		t.Fatalf("%s: status %d %s: want 400 naming the model field", what, code, tail(body, 300))
	}
	t.Logf("%s: refused: %s", what, tail(body, 300))
}

// TestAttackModelsScriptedPathReadsWorkerFile: umbrella names a file on
// the worker host as its model (scripted:<path>). Before the fix the worker
// opened it and its replies (a planted secret) came back in umbrella's
// transcript; now the coordinator refuses the model and nothing is read.
func TestAttackModelsScriptedPathReadsWorkerFile(t *testing.T) {
	t.Parallel()
	s := newSecured(t)
	const secret = "acme-db-password-7f3a9c"
	planted := s.writeFile("worker-host/secret.yaml", "- "+secret+"\n")
	umbrella := s.mint("submit", "umbrella")

	code, body := s.postRun(umbrella, map[string]any{
		"agent":   map[string]any{"name": "probe", "model": "scripted:" + planted},
		"message": "what is in the file?",
	})
	if code == http.StatusCreated {
		r := s.waitRun(umbrella, runID(t, body))
		transcript := ""
		if r.Output != nil {
			transcript, _, _ = s.rathctl([]string{"RATH_TOKEN=" + umbrella}, "", "session", "show", r.Output.String(), "--server", s.server)
		}
		t.Fatalf("umbrella's model scripted:%s was accepted (run %s %s, error %q); the worker read the host file: secret in transcript: %v",
			planted, r.ID, r.Status, r.Error, strings.Contains(transcript, secret))
	}
	refusedModel(t, "scripted:<path>", code, body)
	if !strings.Contains(body, "RATH_SCRIPT_DIR") && !strings.Contains(body, "not a path") {
		t.Errorf("refusal %q: want it to say a script is a name, not a path", body)
	}
	// The relative and traversal forms are refused too.
	for _, m := range []string{"scripted:../worker-host/secret.yaml", "scripted:worker-host/secret.yaml", "scripted:.."} {
		code, body := s.postRun(umbrella, map[string]any{"agent": map[string]any{"name": "probe", "model": m}, "message": "x"})
		refusedModel(t, m, code, body)
	}
	if strings.Contains(s.worker.output(), secret) {
		t.Error("the worker's log holds the planted secret")
	}
}

// TestAttackModelsScriptedFIFOHoldsWorkerSlot: umbrella names a FIFO as
// its model. Before the fix the worker's only slot blocked opening it
// forever, so acme's legitimate run never ran; now the model is refused at
// submit and acme's run succeeds.
func TestAttackModelsScriptedFIFOHoldsWorkerSlot(t *testing.T) {
	t.Parallel()
	s := newSecured(t)
	fifo := filepath.Join(s.dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	umbrella := s.mint("submit", "umbrella")
	acme := s.mint("submit", "acme")

	code, body := s.postRun(umbrella, map[string]any{
		"agent":   map[string]any{"name": "jam", "model": "scripted:" + fifo},
		"message": "hold the slot",
	})
	attackAccepted := code == http.StatusCreated
	if !attackAccepted {
		refusedModel(t, "scripted:<fifo>", code, body)
	}

	agent := s.writeFile("acme.yaml", "name: echo\nmodel: scripted\nscript:\n  - content: acme's answer\n")
	out := s.as(acme, "run", "--agent", agent, "--message", "acme's question", "-o", "json")
	id := runID(t, out)
	var r runs.Run
	done := within(20*time.Second, func() bool {
		o, _, c := s.rathctl([]string{"RATH_TOKEN=" + acme}, "", "runs", "show", id, "-o", "json")
		return c == 0 && json.Unmarshal([]byte(o), &r) == nil && r.Status.Terminal()
	})
	if !done || r.Status != runs.RunSucceeded {
		t.Fatalf("acme's run %s: status %q after 20s (umbrella's scripted:FIFO model accepted: %v): the worker's only slot is held", id, r.Status, attackAccepted)
	}
	if attackAccepted {
		t.Fatalf("umbrella's scripted:<fifo> model was accepted (%s)", body)
	}
}

// TestAttackModelsHugeNamesGrowMetrics: umbrella submits runs whose model
// names are 200 KB each and distinct. Before the fix every name became a
// label of a dozen series on the worker's /metrics; now such names are
// refused at submit, and a valid model the operator did not configure is
// counted as model="other".
func TestAttackModelsHugeNamesGrowMetrics(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	srv.Handle(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Content: "ok"} })
	health := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	s := newSecured(t, secOptions{
		WorkerEnv:  []string{"OPENAI_BASE_URL=" + srv.URL(), "OPENAI_API_KEY=sk-e2e-models", "OPENAI_DEFAULT_MODEL=gpt-configured"},
		WorkerArgs: []string{"--health", health},
	})
	metrics := func() string {
		res, err := http.Get("http://" + health + "/metrics")
		if err != nil {
			return ""
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	testenv.Eventually(t, 60*time.Second, "the worker's /metrics", func() bool { return metrics() != "" })
	before := len(metrics())
	umbrella := s.mint("submit", "umbrella")

	const runsN, nameBytes = 4, 200_000
	var accepted []string
	for i := range runsN {
		model := fmt.Sprintf("m%d-", i) + strings.Repeat("x", nameBytes)
		code, body := s.postRun(umbrella, map[string]any{"agent": map[string]any{"name": "big", "model": model}, "message": "hi"})
		if code == http.StatusCreated {
			accepted = append(accepted, runID(t, body))
			continue
		}
		refusedModel(t, "a 200 KB model name", code, body)
		if !strings.Contains(body, "128") {
			t.Errorf("refusal %q: want the limit named", tail(body, 300))
		}
	}
	for _, id := range accepted {
		s.waitRun(umbrella, id)
	}
	if after := len(metrics()); after-before > 256<<10 {
		t.Fatalf("the worker's /metrics grew from %d to %d bytes after %d runs with %d-byte model names (%d accepted)",
			before, after, runsN, nameBytes, len(accepted))
	}

	// A well-formed model the operator did not configure is labeled other.
	code, body := s.postRun(umbrella, map[string]any{"agent": map[string]any{"name": "odd", "model": "tenant-chosen-model-1"}, "message": "hi"})
	if code != http.StatusCreated {
		t.Fatalf("a valid model: status %d %s", code, body)
	}
	if r := s.waitRun(umbrella, runID(t, body)); r.Status != runs.RunSucceeded {
		t.Fatalf("run with a valid model: %s %s", r.Status, r.Error)
	}
	m := metrics()
	if strings.Contains(m, "tenant-chosen-model-1") || !strings.Contains(m, `rath_model_calls_total{model="other",outcome="ok"}`) {
		t.Errorf("an unconfigured model's calls: want them under model=\"other\"; /metrics model lines:\n%s", modelLines(m))
	}
}

// modelLines returns the rath_model_calls_total lines of a scrape.
func modelLines(scrape string) string {
	var out []string
	for l := range strings.SplitSeq(scrape, "\n") {
		if strings.HasPrefix(l, "rath_model_calls_total") {
			out = append(out, tail(l, 200))
		}
	}
	return strings.Join(out, "\n")
}
