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
	"github.com/rath-run/rath/internal/auth"
	"github.com/rath-run/rath/internal/coordinator"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/sandbox/policy"
	"github.com/rath-run/rath/pkg/session"
)

// placeStack is a coordinator under the cluster's default sandbox policy
// (docker only, rath-sandbox:busybox only, no network) on a SQLite store,
// with no workers: steps stay pending.
func placeStack(t *testing.T) (*client.Client, func() int) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	d, err := app.StartDev(ctx, app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", Workers: -1, StoreURL: "sqlite:" + filepath.Join(dir, "rath.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	b := d.Backend
	c, err := coordinator.New(b.Store, b.Runs, b.Bus, coordinator.Config{SandboxPolicy: policy.Default(false, "rath-sandbox:busybox")})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	cl, err := client.New(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	return cl, func() int { return versions(t, b.Store) }
}

// TestSubmitWorkflowSandbox: a workflow file whose agent asks for a
// sandbox outside the operator's policy (a backend, an image, a network),
// or for an unknown backend, is refused at submit with a 400 naming the
// block's field and its line, and writes no run and no version; a block
// inside the policy is accepted.
func TestSubmitWorkflowSandbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cl, count := placeStack(t)
	file := func(sandbox string) string {
		return "agents:\n  plain:\n    model: scripted\n    script: [x]\n  builder:\n    model: scripted\n    tools: [builtin]\n    script: [x]\n" +
			sandbox + "steps:\n  - agent: plain\n  - agent: builder\n"
	}
	before := count()
	for _, tc := range []struct{ name, sandbox, want string }{
		{"image outside", "    sandbox:\n      backend: docker\n      image: alpine:latest\n",
			`workflow:11:7: agents.builder.sandbox.image: "alpine:latest" is not allowed by the operator's sandbox policy`},
		{"backend outside", "    sandbox: {backend: local}\n",
			`workflow:9:15: agents.builder.sandbox.backend: "local" is not allowed by the operator's sandbox policy`},
		{"network outside", "    sandbox:\n      backend: docker\n      network: egress\n",
			"workflow:11:7: agents.builder.sandbox.network: "},
		{"unknown backend", "    sandbox: {backend: vm}\n",
			`workflow:9:15: agents.builder: rath: invalid agent spec: sandbox.backend: "vm" is not a sandbox backend`},
	} {
		err := cl.Do(ctx, http.MethodPost, "/v1/runs", map[string]any{"workflow": file(tc.sandbox), "message": "go"}, nil)
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Message, tc.want) {
			t.Errorf("%s: %v; want a 400 containing %q", tc.name, err, tc.want)
		}
	}
	if after := count(); after != before {
		t.Errorf("refused submits wrote versions: %d before, %d after", before, after)
	}
	var r runs.Run
	if err := cl.Do(ctx, http.MethodPost, "/v1/runs", map[string]any{
		"workflow": file("    sandbox: {backend: docker, image: rath-sandbox:busybox, network: none, timeout_seconds: 60}\n"), "message": "go",
	}, &r); err != nil {
		t.Fatalf("a block inside the policy: %v", err)
	}
	if r.Kind != runs.KindWorkflow {
		t.Errorf("run %+v, want a workflow run", r)
	}
}

// TestStepSandboxPlacesInput: a step whose agent has a sandbox block runs
// on it: the step's input is a version with op place on that placement,
// child of the version the driver gave, keyed by the step (a retry of the
// same step gets the same version, a step on an input placed there already
// places nothing). A block outside the policy is refused naming
// call.agent.sandbox, writing nothing.
func TestStepSandboxPlacesInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cl, count := placeStack(t)
	var r runs.Run
	if err := cl.Do(ctx, http.MethodPost, "/v1/runs", map[string]any{"driver": "client", "message": "go"}, &r); err != nil {
		t.Fatal(err)
	}
	call := func(sandbox string) json.RawMessage {
		return json.RawMessage(`{"kind":"agent","agent":{"name":"b","model":"scripted","tools":["builtin"],"script":[{"content":"x"}],"sandbox":` + sandbox + `}}`)
	}
	put := func(key, sandbox string, input session.ID) (runs.Step, error) {
		var st runs.Step
		err := cl.Do(ctx, http.MethodPut, "/v1/runs/"+r.ID+"/steps/"+key, map[string]any{"call": call(sandbox), "input": input.String()}, &st)
		return st, err
	}
	docker := `{"backend":"docker","image":"rath-sandbox:busybox"}`
	st, err := put("s1", docker, r.Input)
	if err != nil {
		t.Fatalf("put a step on docker: %v", err)
	}
	in, err := cl.Graph().Get(ctx, st.Input)
	if err != nil {
		t.Fatal(err)
	}
	if in.Op != session.OpPlace || in.Placement.Backend != "docker" || in.Placement.Spec.Image != "rath-sandbox:busybox" ||
		len(in.Parents) != 1 || in.Parents[0] != r.Input || in.Key != "place/"+runs.KeyedStepID(r.ID, "s1") {
		t.Errorf("the step's input = %+v; want op place on docker rath-sandbox:busybox, child of %s, keyed by the step", in, r.Input)
	}
	n := count()
	if again, err := put("s1", docker, r.Input); err != nil || again.Input != st.Input {
		t.Errorf("the same step again: %+v, %v; want the same input %s", again, err, st.Input)
	}
	if st2, err := put("s2", docker, st.Input); err != nil || st2.Input != st.Input {
		t.Errorf("a step on an input already there: %+v, %v; want that input, unplaced again", st2, err)
	}
	if after := count(); after != n {
		t.Errorf("versions %d → %d; want no new place", n, after)
	}
	for _, tc := range []struct{ sandbox, field string }{
		{`{"backend":"local"}`, "call.agent.sandbox: placement.backend: "},
		{`{"backend":"docker","image":"alpine"}`, "call.agent.sandbox: placement.spec.image: "},
		{`{"backend":"vm"}`, "sandbox.backend"},
	} {
		_, err := put("s3", tc.sandbox, r.Input)
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Message, tc.field) {
			t.Errorf("sandbox %s: %v; want a 400 naming %q", tc.sandbox, err, tc.field)
		}
	}
	if after := count(); after != n {
		t.Errorf("refused steps wrote versions: %d → %d", n, after)
	}
}

// TestStepSandboxTenants: through a step with a sandbox block, tenant
// umbrella cannot place acme's session (its input reads as missing), nor
// put a step on acme's run; a read token cannot put a step at all; none of
// it writes a version.
func TestStepSandboxTenants(t *testing.T) {
	t.Parallel()
	s := newAuthStack(t, "postgres", -1)
	acme := s.mint(t, auth.ScopeSubmit, "acme")
	eve := s.mint(t, auth.ScopeSubmit, "umbrella")
	eveRead := s.mint(t, auth.ScopeRead, "umbrella")
	var acmeRun, eveRun struct {
		ID    string `json:"id"`
		Input string `json:"input"`
	}
	s.mustCall(t, http.StatusCreated, acme.Secret, "POST", "/v1/runs", `{"driver":"client","message":"acme's secret"}`, &acmeRun)
	s.mustCall(t, http.StatusCreated, eve.Secret, "POST", "/v1/runs", `{"driver":"client","message":"umbrella's own"}`, &eveRun)
	before := versions(t, s.dev.Backend.Store)
	step := func(input string) string {
		return `{"call":{"kind":"agent","agent":{"name":"b","model":"scripted","script":[{"content":"x"}],"sandbox":{"backend":"docker"}}},"input":"` + input + `"}`
	}
	for _, tc := range []struct {
		name, token, path, body string
		want                    int
	}{
		{"umbrella places acme's session", eve.Secret, "/v1/runs/" + eveRun.ID + "/steps/k", step(acmeRun.Input), http.StatusBadRequest},
		{"umbrella steps on acme's run", eve.Secret, "/v1/runs/" + acmeRun.ID + "/steps/k", step(eveRun.Input), http.StatusNotFound},
		{"umbrella's read token", eveRead.Secret, "/v1/runs/" + eveRun.ID + "/steps/k", step(eveRun.Input), http.StatusForbidden},
	} {
		if code, b := s.call(t, tc.token, "PUT", tc.path, tc.body); code != tc.want || strings.Contains(string(b), "secret") {
			t.Errorf("%s: %d %s, want %d", tc.name, code, b, tc.want)
		}
	}
	if after := versions(t, s.dev.Backend.Store); after != before {
		t.Errorf("versions %d → %d after umbrella's attempts", before, after)
	}
	// Acme's own step is placed, in acme's tenant.
	var st runs.Step
	s.mustCall(t, http.StatusOK, acme.Secret, "PUT", "/v1/runs/"+acmeRun.ID+"/steps/k", step(acmeRun.Input), &st)
	var v session.Version
	s.mustCall(t, http.StatusOK, acme.Secret, "GET", "/v1/versions/"+st.Input.String(), "", &v)
	if v.Op != session.OpPlace || v.Placement.Backend != "docker" {
		t.Errorf("acme's step input = %+v, want op place on docker", v)
	}
	if code, _ := s.call(t, eve.Secret, "GET", "/v1/versions/"+st.Input.String(), ""); code != http.StatusNotFound {
		t.Errorf("umbrella reads acme's placed input: %d, want 404", code)
	}
}
