package coordinator_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/coordinator"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/client"
)

// TestSubmitRefusesWhatTheWorkersDoNotOffer: a coordinator told what its
// workers offer (the built-ins plus lookup; the MCP command
// /usr/bin/mcp-ok) refuses, with a 400 naming the field and writing no
// run, an agent run, a workflow file's agent and a client-driven step
// whose spec names another tool or MCP command; it accepts the offered
// ones. A coordinator told nothing checks nothing.
func TestSubmitRefusesWhatTheWorkersDoNotOffer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	d, err := app.StartDev(ctx, app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", Workers: -1, StoreURL: "sqlite:" + filepath.Join(dir, "rath.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	tools, err := app.ToolOffer("lookup")
	if err != nil {
		t.Fatal(err)
	}
	newClient := func(cfg coordinator.Config) *client.Client {
		c, err := coordinator.New(d.Backend.Store, d.Backend.Runs, d.Backend.Bus, cfg)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(c.Handler())
		t.Cleanup(srv.Close)
		cl, err := client.New(srv.URL, "")
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	cl := newClient(coordinator.Config{Tools: tools, MCP: app.MCPOffer("/usr/bin/mcp-ok")})
	blind := newClient(coordinator.Config{})
	count := func() int {
		list, err := d.Backend.Runs.List(ctx, runs.ListParams{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}
	spec := func(extra string) json.RawMessage {
		return json.RawMessage(`{"name":"a","model":"scripted","script":["x"]` + extra + `}`)
	}
	refused := func(what string, err error, want string) {
		t.Helper()
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Message, want) {
			t.Errorf("%s: %v; want a 400 containing %q", what, err, want)
		}
	}
	before := count()
	for _, tc := range []struct{ extra, want string }{
		{`,"tools":["builtin","teleport"]`, `agent.tools[1]: unknown tool "teleport" (the workers offer: builtin, list_workspace_files, lookup, `},
		{`,"mcp":[{"name":"ok","command":"/usr/bin/mcp-ok"},{"name":"sh","command":"/bin/sh"}]`,
			`agent.mcp[1].command: "/bin/sh" is not allowed by the operator's MCP policy (RATH_MCP_ALLOW allows: /usr/bin/mcp-ok)`},
	} {
		err := cl.Do(ctx, http.MethodPost, "/v1/runs", map[string]any{"agent": spec(tc.extra), "message": "go"}, nil)
		refused("agent run"+tc.extra, err, tc.want)
	}
	wf := "agents:\n  a:\n    model: scripted\n    script: [x]\n    mcp:\n      - name: sh\n        command: /bin/sh\nsteps:\n  - agent: a\n"
	refused("workflow file", cl.Do(ctx, http.MethodPost, "/v1/runs", map[string]any{"workflow": wf, "message": "go"}, nil),
		`workflow:7:9: agents.a.mcp[0].command: "/bin/sh" is not allowed`)
	if after := count(); after != before {
		t.Errorf("refused submits recorded runs: %d → %d", before, after)
	}
	var r runs.Run
	if err := cl.Do(ctx, http.MethodPost, "/v1/runs", map[string]any{"driver": "client", "message": "go"}, &r); err != nil {
		t.Fatal(err)
	}
	call := json.RawMessage(`{"kind":"agent","agent":{"name":"b","model":"scripted","tools":["teleport"],"script":[{"content":"x"}]}}`)
	refused("client step", cl.Do(ctx, http.MethodPut, "/v1/runs/"+r.ID+"/steps/s1", map[string]any{"call": call, "input": r.Input.String()}, nil),
		`call.agent.tools[0]: unknown tool "teleport"`)

	ok := spec(`,"tools":["builtin","lookup"],"mcp":[{"name":"ok","command":"/usr/bin/mcp-ok"}]`)
	if err := cl.Do(ctx, http.MethodPost, "/v1/runs", map[string]any{"agent": ok, "message": "go"}, nil); err != nil {
		t.Errorf("an offered tool and command: %v", err)
	}
	if err := blind.Do(ctx, http.MethodPost, "/v1/runs", map[string]any{"agent": spec(`,"tools":["teleport"],"mcp":[{"name":"sh","command":"/bin/sh"}]`), "message": "go"}, nil); err != nil {
		t.Errorf("a coordinator told nothing refused: %v", err)
	}
}
