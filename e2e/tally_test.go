package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/pkg/llm/llmtest"
	"github.com/rath-run/rath/pkg/session"
)

// tallyRig is a multi-round tool agent for tests with real worker
// processes: each step calls the test MCP server's tally tool (it appends
// its key to a file, so executions are counted across processes) in
// rounds 1..toolRounds and answers in the round after.
type tallyRig struct {
	file string // the tally file
	spec json.RawMessage
	env  []string // for the workers: the sandbox policy and RATH_MCP_ALLOW
}

// newTallyRig writes the local sandbox policy and the agent spec; the MCP
// server's tally is declared idempotent when idempotent is set.
func newTallyRig(t *testing.T, idempotent bool) *tallyRig {
	t.Helper()
	dir := t.TempDir()
	pol := filepath.Join(dir, "sandbox-policy.yaml")
	if err := os.WriteFile(pol, []byte("backends: [local]\ndefault: local\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := bin(t, "mcpserver")
	r := &tallyRig{file: filepath.Join(dir, "tally.txt"),
		env: []string{"RATH_SANDBOX_POLICY=" + pol, "RATH_MCP_ALLOW=" + srv}}
	mcp := map[string]any{"name": "cnt", "command": srv, "tools": []string{"tally"},
		"env": map[string]string{"MCPSERVER_TALLY": r.file}}
	if idempotent {
		mcp["idempotent"] = []string{"tally"}
	}
	spec, err := json.Marshal(map[string]any{"name": "tally", "model": "fake", "mcp": []any{mcp}})
	if err != nil {
		t.Fatal(err)
	}
	r.spec = spec
	return r
}

// tallyModel is the fake OpenAI server for a tallyRig: in round i ≤
// toolRounds it calls cnt__tally with the key "<user message>#<i>" (its
// first execution held holdMS), after that it answers "ok". Every reply
// comes after latency.
func tallyModel(t *testing.T, toolRounds, holdMS int, latency time.Duration) (*llmtest.Server, []string) {
	t.Helper()
	srv := llmtest.NewServer(t)
	srv.Handle(func(r llmtest.Request) llmtest.Reply {
		n, msg := 0, ""
		for _, m := range r.Messages {
			switch {
			case m.Role == "assistant":
				n++
			case m.Role == "user" && m.Content != nil:
				msg = *m.Content
			}
		}
		usage := session.Usage{PromptTokens: 10, CompletionTokens: 5}
		if n >= toolRounds {
			return llmtest.Reply{Content: "ok", Usage: usage, Delay: latency}
		}
		args, _ := json.Marshal(map[string]any{"key": fmt.Sprintf("%s#%d", msg, n+1), "hold_first_ms": holdMS})
		return llmtest.Reply{Usage: usage, Delay: latency, ToolCalls: []session.ToolCall{{
			ID: fmt.Sprintf("t%d", n+1), Type: "function",
			Function: session.FunctionCall{Name: "cnt__tally", Arguments: string(args)},
		}}}
	})
	return srv, []string{"OPENAI_API_KEY=sk-tally-test", "OPENAI_BASE_URL=" + srv.URL(), "OPENAI_DEFAULT_MODEL=fake"}
}

// counts returns how many times tally ran for each key.
func (r *tallyRig) counts(t *testing.T) map[string]int {
	t.Helper()
	b, err := os.ReadFile(r.file)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" {
			n[l]++
		}
	}
	return n
}
