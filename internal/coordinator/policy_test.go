package coordinator_test

import (
	"bytes"
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
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/sandbox/policy"
	"github.com/rath-run/rath/pkg/session"
)

// TestPlacementPolicyAtTheAPI: every way a placement enters through the
// API is checked against the operator's sandbox policy, refused with a 400
// naming the field, and writes nothing.
func TestPlacementPolicyAtTheAPI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	d, err := app.StartDev(ctx, app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", Workers: -1, StoreURL: "sqlite:" + filepath.Join(dir, "rath.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	b := d.Backend
	serve := func(p *policy.Policy) *client.Client {
		c, err := coordinator.New(b.Store, b.Runs, b.Bus, coordinator.Config{SandboxPolicy: p})
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
	cl := serve(policy.Default(false, "rath-sandbox:busybox"))
	refused := func(what string, err error, field string) {
		t.Helper()
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Message, field+": ") || !strings.Contains(ae.Message, "sandbox policy") {
			t.Errorf("%s: %v; want a 400 naming %s", what, err, field)
		}
	}
	base, err := session.FromUserMessage(ctx, cl.Graph(), "hi")
	if err != nil {
		t.Fatal(err)
	}
	onDocker, err := base.To(ctx, session.Placement{Backend: "docker"})
	if err != nil {
		t.Fatalf("docker placement: %v", err)
	}
	before := versions(t, b.Store)
	_, err = onDocker.To(ctx, session.Placement{Backend: "local"})
	refused("POST /v1/versions to local", err, "placement.backend")
	_, err = onDocker.To(ctx, session.Placement{Backend: "docker", Spec: session.Spec{Network: "bridge"}})
	refused("POST /v1/versions on network bridge", err, "placement.spec.network")

	// An import whose first version is allowed and second is not imports
	// nothing; a differently cased key is checked too (encoding/json
	// matches keys case-insensitively, for the import as for the check).
	mem := session.NewMemoryGraph()
	s, err := session.FromUserMessage(ctx, mem, "imported")
	if err != nil {
		t.Fatal(err)
	}
	if s, err = s.To(ctx, session.Placement{Backend: "docker"}); err != nil {
		t.Fatal(err)
	}
	moved, err := s.To(ctx, session.Placement{Backend: "local"})
	if err != nil {
		t.Fatal(err)
	}
	var jsonl bytes.Buffer
	if err := session.Export(ctx, mem, moved.ID(), &jsonl); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"import":          jsonl.String(),
		"import, recased": strings.ReplaceAll(jsonl.String(), `"placement"`, `"PlaceMent"`),
	} {
		err := cl.Stream(ctx, http.MethodPost, "/v1/sessions/import", strings.NewReader(body), "application/x-ndjson", &bytes.Buffer{})
		refused(name, err, "placement.backend")
		if err != nil && !strings.Contains(err.Error(), "line 4: version: ") {
			t.Errorf("%s: %v; want the line named", name, err)
		}
	}
	if after := versions(t, b.Store); after != before {
		t.Fatalf("versions %d → %d after refused placements; want none written", before, after)
	}

	// Submit: an agent with tools on a session placed where the policy
	// does not reach; the same agent without tools is accepted.
	none := serve(mustParse(t, "backends: []\n"))
	tools := json.RawMessage(`{"name":"t","model":"scripted","tools":["builtin"],"script":[{"content":"x"}]}`)
	var run json.RawMessage
	err = none.Do(ctx, http.MethodPost, "/v1/runs", coordinator.SubmitRequest{Agent: tools, Message: "hi"}, &run)
	refused("submit with tools, no default backend", err, "placement.backend")
	err = cl.Do(ctx, http.MethodPost, "/v1/runs", coordinator.SubmitRequest{Agent: tools, Session: base.ID().String()}, &run)
	if err != nil {
		t.Errorf("submit with tools on an unplaced session (runs on docker): %v", err)
	}
	if err := none.Do(ctx, http.MethodPost, "/v1/runs", coordinator.SubmitRequest{Agent: json.RawMessage(spec), Message: "hi"}, &run); err != nil {
		t.Errorf("submit without tools under a policy with no backend: %v", err)
	}
}

func mustParse(t *testing.T, y string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPlaceEndpoint: POST /v1/sessions/{id}/place commits a version with op
// place on an allowed placement, and refuses at submit, naming the field and
// writing nothing, a placement outside the operator's sandbox policy, an
// unknown backend or image, and a snapshot the client tries to choose.
func TestPlaceEndpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cl, count := placeStack(t)
	base, err := session.FromUserMessage(ctx, cl.Graph(), "hi")
	if err != nil {
		t.Fatal(err)
	}
	path := "/v1/sessions/" + base.ID().String() + "/place"
	var out struct {
		ID        string            `json:"id"`
		Op        string            `json:"op"`
		Placement session.Placement `json:"placement"`
	}
	if err := cl.Do(ctx, http.MethodPost, path, session.Placement{Backend: "docker", Spec: session.Spec{Image: "rath-sandbox:busybox"}}, &out); err != nil {
		t.Fatalf("place on docker: %v", err)
	}
	if out.Op != "place" || out.Placement.Backend != "docker" || out.Placement.Spec.Image != "rath-sandbox:busybox" {
		t.Errorf("placed version = %+v, want op place on docker rath-sandbox:busybox", out)
	}
	before := count()
	for _, tc := range []struct {
		name  string
		body  any
		field string
	}{
		{"local", session.Placement{Backend: "local"}, "placement.backend"},
		{"unknown backend", session.Placement{Backend: "vm"}, "placement.backend"},
		{"unknown image", session.Placement{Backend: "docker", Spec: session.Spec{Image: "x"}}, "placement.spec.image"},
		{"bridge network", session.Placement{Backend: "docker", Spec: session.Spec{Network: "bridge"}}, "placement.spec.network"},
		{"no backend", session.Placement{}, "backend"},
		{"snapshot", session.Placement{Backend: "docker", Snapshot: "sha256:abc"}, "snapshot"},
		{"bad json", json.RawMessage(`{"backend":1}`), ""},
	} {
		err := cl.Do(ctx, http.MethodPost, path, tc.body, nil)
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Message, tc.field) {
			t.Errorf("%s: %v; want a 400 naming %q", tc.name, err, tc.field)
		}
	}
	if after := count(); after != before {
		t.Errorf("refused placements wrote versions: %d before, %d after", before, after)
	}
}

// TestSubmitSpecSandbox: an agent spec's sandbox block places the run's
// input session (a version with op place) at submit, and a block outside
// the operator's policy is refused there, naming agent.sandbox and the
// field, with no run and no version written.
func TestSubmitSpecSandbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cl, count := placeStack(t)
	agentJSON := func(sandbox string) json.RawMessage {
		return json.RawMessage(`{"name":"a","model":"scripted","script":[{"content":"hi"}],"tools":["builtin"],"sandbox":` + sandbox + `}`)
	}
	var r struct {
		Input string `json:"input"`
	}
	if err := cl.Do(ctx, http.MethodPost, "/v1/runs", map[string]any{"agent": agentJSON(`{"backend":"docker","image":"rath-sandbox:busybox"}`), "message": "go"}, &r); err != nil {
		t.Fatalf("submit on docker: %v", err)
	}
	var in struct {
		Op        string            `json:"op"`
		Placement session.Placement `json:"placement"`
	}
	if err := cl.Do(ctx, http.MethodGet, "/v1/sessions/"+r.Input, nil, &in); err != nil {
		t.Fatal(err)
	}
	if in.Op != "place" || in.Placement.Backend != "docker" || in.Placement.Spec.Image != "rath-sandbox:busybox" {
		t.Errorf("the run's input = %+v, want op place on docker rath-sandbox:busybox", in)
	}
	before := count()
	for _, tc := range []struct{ sandbox, field string }{
		{`{"backend":"local"}`, "agent.sandbox: placement.backend"},
		{`{"backend":"docker","image":"x"}`, "agent.sandbox: placement.spec.image"},
		{`{"backend":"docker","network":"egress"}`, "agent.sandbox: placement.spec.network"},
		{`{"backend":"vm"}`, "sandbox.backend"},
	} {
		err := cl.Do(ctx, http.MethodPost, "/v1/runs", map[string]any{"agent": agentJSON(tc.sandbox), "message": "go"}, nil)
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Message, tc.field) {
			t.Errorf("sandbox %s: %v; want a 400 naming %q", tc.sandbox, err, tc.field)
		}
	}
	if after := count(); after != before {
		t.Errorf("refused submits wrote versions: %d before, %d after", before, after)
	}
}
