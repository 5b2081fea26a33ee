package coordinator_test

import (
	"net/http"
	"testing"

	"github.com/rath-run/rath/internal/auth"
)

// TestRunServiceScope: the run service acts only in the scope the auth
// middleware resolved. Umbrella's submit token cannot put, read, wait on,
// complete, fail, decide or cancel acme's client-driven workflow run (404:
// it learns nothing), and acme's read token may call none of the run
// service's writes (403); acme's run is untouched, and acme itself then
// completes it.
func TestRunServiceScope(t *testing.T) {
	t.Parallel()
	s := newAuthStack(t, "postgres", -1)
	acme := s.mint(t, auth.ScopeSubmit, "acme")
	acmeRead := s.mint(t, auth.ScopeRead, "acme")
	eve := s.mint(t, auth.ScopeSubmit, "umbrella")

	var run struct {
		ID     string `json:"id"`
		Input  string `json:"input"`
		Status string `json:"status"`
		Steps  []struct {
			Key string `json:"key"`
		} `json:"steps"`
	}
	s.mustCall(t, http.StatusCreated, acme.Secret, "POST", "/v1/runs", `{"driver":"client","message":"acme's secret prompt"}`, &run)
	// No worker runs: the step stays pending.
	s.mustCall(t, http.StatusOK, acme.Secret, "PUT", "/v1/runs/"+run.ID+"/steps/s1", `{"call":`+spec+`,"input":"`+run.Input+`"}`, nil)
	var own struct {
		ID string `json:"id"`
	}
	s.mustCall(t, http.StatusCreated, eve.Secret, "POST", "/v1/sessions", `{"user":"umbrella's own"}`, &own)

	writes := []struct{ method, path, body string }{
		{"PUT", "/v1/runs/" + run.ID + "/steps/s2", `{"call":` + spec + `,"input":"` + own.ID + `"}`},
		{"PUT", "/v1/runs/" + run.ID + "/steps/s1", `{"call":` + spec + `,"input":"` + own.ID + `"}`},
		{"POST", "/v1/runs/" + run.ID + "/complete", `{"output":"` + own.ID + `"}`},
		{"POST", "/v1/runs/" + run.ID + "/fail", `{"error":"umbrella says so"}`},
		{"POST", "/v1/runs/" + run.ID + "/approvals", `{"decision":"approve"}`},
		{"POST", "/v1/runs/" + run.ID + "/cancel", ""},
	}
	reads := []struct{ method, path, body string }{
		{"GET", "/v1/runs/" + run.ID + "/steps/s1", ""},
		{"GET", "/v1/runs/" + run.ID + "/steps/s1?wait=1s", ""},
	}
	for _, tc := range append(append(reads[:0:0], reads...), writes...) {
		if code, b := s.call(t, eve.Secret, tc.method, tc.path, tc.body); code != http.StatusNotFound {
			t.Errorf("umbrella %s %s = %d %s, want 404", tc.method, tc.path, code, b)
		}
	}
	for _, tc := range append(writes, struct{ method, path, body string }{"POST", "/v1/runs", `{"driver":"client","message":"x"}`}) {
		if code, b := s.call(t, acmeRead.Secret, tc.method, tc.path, tc.body); code != http.StatusForbidden {
			t.Errorf("acme's read token %s %s = %d %s, want 403", tc.method, tc.path, code, b)
		}
	}
	s.mustCall(t, http.StatusOK, acmeRead.Secret, "GET", "/v1/runs/"+run.ID, "", &run)
	if run.Status != "running" || len(run.Steps) != 1 || run.Steps[0].Key != "s1" {
		t.Fatalf("acme's run after the attempts: %s with steps %+v; want running with s1 alone", run.Status, run.Steps)
	}
	s.mustCall(t, http.StatusOK, acmeRead.Secret, "GET", "/v1/runs/"+run.ID+"/steps/s1", "", nil)
	s.mustCall(t, http.StatusOK, acme.Secret, "POST", "/v1/runs/"+run.ID+"/complete", `{"output":"`+run.Input+`"}`, &run)
	if run.Status != "succeeded" {
		t.Fatalf("acme completing its run: %s, want succeeded", run.Status)
	}
}
