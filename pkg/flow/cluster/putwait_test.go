package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/llm"
)

// TestPutStepWaitOneRequest: PUT …/steps/{key}?wait= records the step and
// returns it ended, with its output, in the same request; putting the key
// again returns the stored step at once; a bad wait is refused naming the
// parameter and records nothing.
func TestPutStepWaitOneRequest(t *testing.T) {
	t.Parallel()
	c := startStack(t, 1, nil)
	ctx := context.Background()
	run, err := c.StartWorkflow(ctx, client.WorkflowRequest{Message: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	call, err := json.Marshal(flow.Call{Kind: flow.KindAgent, Agent: agent.Spec{Name: "echo", Model: "scripted", Script: []llm.ScriptReply{{Content: "hello"}}}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.PutStepWait(ctx, run.ID, "s1", call, run.Input, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != "committed" || st.Output == nil {
		t.Fatalf("step after PUT ?wait=30s: %+v, want committed with an output", st)
	}
	again, err := c.PutStepWait(ctx, run.ID, "s1", call, run.Input, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if again.Status != "committed" || again.Output == nil || *again.Output != *st.Output || again.Attempts != st.Attempts {
		t.Fatalf("the same key again: %+v, want the stored step %+v", again, st)
	}
	var apiErr *client.APIError
	err = c.Do(ctx, http.MethodPut, "/v1/runs/"+run.ID+"/steps/s2?wait=2m", map[string]any{"call": call, "input": run.Input}, nil)
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest || !strings.Contains(apiErr.Message, "wait") {
		t.Fatalf("PUT ?wait=2m: %v, want a 400 naming wait", err)
	}
	if _, err := c.GetStep(ctx, run.ID, "s2", 0); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("step s2 after a refused PUT: %v, want not found", err)
	}
}
