package coordinator_test

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/app/apptest"
	"github.com/rath-run/rath/internal/coordinator"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/session"
)

// TestLineageEndpoints runs a scripted agent on the dev stack and reads
// the run's graph, the session's graph and the output's blame back
// through the API.
func TestLineageEndpoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	d := apptest.Dev(t, dir)
	h := d.Coordinator.Handler()
	spec := json.RawMessage(`{"name":"echo","model":"scripted","script":[{"content":"hello from the scripted model"}]}`)
	run, err := d.Coordinator.Submit(ctx, coordinator.SubmitRequest{Agent: spec, Message: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "run to end", func() bool {
		run, err = d.Backend.Runs.Get(ctx, run.ID)
		return err == nil && run.Status.Terminal()
	})
	if run.Status != runs.RunSucceeded || run.Output == nil {
		t.Fatalf("run ended %s: %s", run.Status, run.Error)
	}

	var g lineage.Graph
	if code, body := get(t, h, "/v1/runs/"+run.ID+"/graph", &g); code != http.StatusOK {
		t.Fatalf("run graph: %d %s", code, body)
	}
	if len(g.Nodes) != 2 || len(g.Edges) != 1 || g.Output == nil || *g.Output != *run.Output {
		t.Fatalf("run graph = %+v", g)
	}
	for _, n := range g.Nodes {
		want := lineage.StatusContext // the input, made at submit
		if n.ID == *run.Output {
			want = lineage.StatusOutput
			if n.Agent != "echo" || n.Run != run.ID || n.Tokens == 0 {
				t.Errorf("output node = %+v", n)
			}
		}
		if n.Status != want {
			t.Errorf("node %s status %q, want %q", n.ID, n.Status, want)
		}
	}

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/runs/"+run.ID+"/graph?format=svg", nil))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "image/svg+xml" {
		t.Fatalf("svg: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	if err := xml.Unmarshal(rec.Body.Bytes(), new(struct{})); err != nil {
		t.Fatalf("svg is not XML: %v", err)
	}
	if !strings.Contains(rec.Body.String(), `id="v-`+run.Output.String()+`"`) {
		t.Errorf("svg lacks the output node")
	}

	var sg lineage.Graph
	if code, body := get(t, h, "/v1/sessions/"+run.Input.String()+"/graph", &sg); code != http.StatusOK || len(sg.Nodes) != 2 {
		t.Fatalf("session graph: %d %s", code, body)
	}
	if code, body := get(t, h, "/v1/sessions/"+run.Output.String()+"/graph?format=mermaid", nil); code != http.StatusOK || !strings.HasPrefix(body, "flowchart TD") {
		t.Errorf("mermaid: %d %s", code, body)
	}
	if code, body := get(t, h, "/v1/sessions/"+run.Output.String()+"/graph?depth=1", &sg); code != http.StatusOK || len(sg.Nodes) != 2 || *sg.Output != *run.Output {
		t.Errorf("graph around the output: %d %s", code, body)
	}

	var blame struct {
		ID     session.ID      `json:"id"`
		Chunks []lineage.Entry `json:"chunks"`
	}
	if code, body := get(t, h, "/v1/sessions/"+run.Output.String()+"/blame", &blame); code != http.StatusOK {
		t.Fatalf("blame: %d %s", code, body)
	}
	if len(blame.Chunks) != 2 || blame.Chunks[0].Version != run.Input || blame.Chunks[1].Version != *run.Output ||
		blame.Chunks[1].Agent != "echo" || blame.Chunks[1].Run != run.ID || blame.Chunks[1].Worker == "" {
		t.Errorf("blame = %+v", blame)
	}

	for path, want := range map[string]int{
		"/v1/runs/" + run.ID + "/graph?format=png":                http.StatusBadRequest,
		"/v1/runs/no-such-run/graph":                              http.StatusNotFound,
		"/v1/sessions/nope/graph":                                 http.StatusBadRequest,
		"/v1/sessions/" + session.NewID().String() + "/blame":     http.StatusNotFound,
		"/v1/sessions/" + run.Output.String() + "/graph?depth=-1": http.StatusBadRequest,
	} {
		if code, body := get(t, h, path, nil); code != want {
			t.Errorf("GET %s = %d %s, want %d", path, code, body, want)
		}
	}
}
