package app_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/session"
)

// TestSubmitRefusesBadModelNames: every way a client hands the coordinator
// an agent spec (an agent run, a declarative workflow file's agents, a
// client-driven workflow's step) refuses a model that is too long or a
// scripted:<path>, with the field and the limit named, and records nothing.
func TestSubmitRefusesBadModelNames(t *testing.T) {
	t.Parallel()
	s := startDev(t, "", app.DevConfig{Workers: -1})
	ctx := context.Background()
	huge := strings.Repeat("x", 900_001)
	agentJSON := func(model string) json.RawMessage {
		b, err := json.Marshal(map[string]any{"name": "a", "model": model})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct{ model, want string }{
		{huge, "model: 900001 bytes, over the 128-byte limit"},
		{"scripted:/etc/hostname", `model: "scripted:/etc/hostname": a scripted model's script is a file name in the worker's RATH_SCRIPT_DIR`},
		{"scripted:../../etc/hostname", "not a path"},
		{"gpt 4o", "a model name is letters, digits"},
	} {
		var r json.RawMessage
		err := s.cl.Do(ctx, "POST", "/v1/runs", map[string]any{"agent": agentJSON(c.model), "message": "hi"}, &r)
		if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("run with model %.30q: %.300v, want a 400 saying %q", c.model, err, c.want)
		}
	}
	_, err := s.cl.StartWorkflow(ctx, client.WorkflowRequest{
		Workflow: "agents:\n  a: {model: \"scripted:/etc/hostname\"}\nsteps:\n  - agent: a\n", Message: "hi"})
	if err == nil || !strings.Contains(err.Error(), "not a path") {
		t.Errorf("workflow file with a scripted:<path> agent: %v", err)
	}
	_, err = s.cl.StartWorkflow(ctx, client.WorkflowRequest{
		Workflow: "agents:\n  a: {model: " + strings.Repeat("m", 200) + "}\nsteps:\n  - agent: a\n", Message: "hi"})
	if err == nil || !strings.Contains(err.Error(), "200 bytes, over the 128-byte limit") {
		t.Errorf("workflow file with a 200-byte model: %v", err)
	}
	run, err := s.cl.StartWorkflow(ctx, client.WorkflowRequest{Message: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	in, err := session.FromUserMessage(ctx, s.dev.Backend.Store, "hi")
	if err != nil {
		t.Fatal(err)
	}
	call, err := json.Marshal(map[string]any{"kind": "agent", "agent": agentJSON("scripted:/proc/self/fd/0")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.cl.PutStep(ctx, run.ID, "s1", call, in.ID()); err == nil || !strings.Contains(err.Error(), "not a path") {
		t.Errorf("client-driven step with a scripted:<path> agent: %v", err)
	}
}
