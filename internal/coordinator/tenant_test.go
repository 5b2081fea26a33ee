package coordinator_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/auth"
)

// TestTenantIsolation attacks tenant acme's objects with tenant umbrella's
// tokens through the API on Postgres: acme's session, run, events,
// workspace and tokens by id answer 404 (not 403: umbrella learns nothing
// about whether they exist), lists leave them out, and nothing is written.
// Acme itself runs a step end to end: the worker's commit lands in acme's
// tenant and acme reads it.
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	s := newAuthStack(t, "postgres", 1)
	acme := s.mint(t, auth.ScopeSubmit, "acme")
	acmeAdmin := s.mint(t, auth.ScopeAdmin, "acme")
	eve := s.mint(t, auth.ScopeSubmit, "umbrella")
	eveAdmin := s.mint(t, auth.ScopeAdmin, "umbrella")

	// Acme: a session and a run that a worker completes.
	sessID, run := s.succeededRun(t, acme.Secret)
	out := *run.Output
	s.mustCall(t, http.StatusOK, acme.Secret, "GET", "/v1/sessions/"+out+"/transcript", "", nil)

	// Umbrella: its own session, for merges and diffs.
	var own struct {
		ID string `json:"id"`
	}
	s.mustCall(t, http.StatusCreated, eve.Secret, "POST", "/v1/sessions", `{"user":"umbrella's own"}`, &own)
	before := versions(t, s.dev.Backend.Store)

	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/v1/sessions/" + sessID, ""},
		{"GET", "/v1/sessions/" + out + "/transcript", ""},
		{"GET", "/v1/sessions/" + out + "/ancestors", ""},
		{"GET", "/v1/sessions/" + sessID + "/descendants", ""},
		{"GET", "/v1/sessions/" + out + "/export", ""},
		{"GET", "/v1/sessions/" + out + "/files", ""},
		{"GET", "/v1/sessions/" + own.ID + "/diff?to=" + out, ""},
		{"POST", "/v1/sessions/" + out + "/fork", ""},
		{"POST", "/v1/sessions/" + out + "/detach", ""},
		{"POST", "/v1/sessions/" + out + "/place", `{"backend":"local"}`},
		{"POST", "/v1/sessions/" + out + "/append", `{"user":"injected"}`},
		{"POST", "/v1/sessions/" + own.ID + "/merge", `{"other":"` + out + `"}`},
		{"POST", "/v1/sessions/" + out + "/merge", `{"other":"` + own.ID + `"}`},
		{"GET", "/v1/runs/" + run.ID, ""},
		{"GET", "/v1/runs/" + run.ID + "/events", ""},
		{"POST", "/v1/runs/" + run.ID + "/cancel", ""},
		{"POST", "/v1/tokens/" + acme.ID + "/revoke", ""},
	} {
		tok := eve.Secret
		if strings.HasPrefix(tc.path, "/v1/tokens") {
			tok = eveAdmin.Secret
		}
		code, b := s.call(t, tok, tc.method, tc.path, tc.body)
		if code != http.StatusNotFound {
			t.Errorf("umbrella %s %s = %d %s, want 404", tc.method, tc.path, code, b)
		}
		if strings.Contains(string(b), "secret prompt") {
			t.Errorf("umbrella %s %s: the body carries acme's content", tc.method, tc.path)
		}
	}
	// Submitting a run on acme's session reads as a missing session.
	if code, b := s.call(t, eve.Secret, "POST", "/v1/runs", `{"agent":`+spec+`,"session":"`+out+`"}`); code != http.StatusBadRequest {
		t.Errorf("umbrella submitting on acme's session = %d %s, want 400", code, b)
	}
	// Lists leave acme out.
	var sl struct {
		Versions []struct {
			ID string `json:"id"`
		} `json:"versions"`
	}
	s.mustCall(t, http.StatusOK, eve.Secret, "GET", "/v1/sessions?limit=1000", "", &sl)
	if len(sl.Versions) != 1 || sl.Versions[0].ID != own.ID {
		t.Errorf("umbrella lists versions %+v, want only its own %s", sl.Versions, own.ID)
	}
	var rl struct {
		Runs []json.RawMessage `json:"runs"`
	}
	s.mustCall(t, http.StatusOK, eve.Secret, "GET", "/v1/runs", "", &rl)
	if len(rl.Runs) != 0 {
		t.Errorf("umbrella lists %d runs, want 0", len(rl.Runs))
	}
	var tl struct {
		Tokens []auth.Token `json:"tokens"`
	}
	s.mustCall(t, http.StatusOK, eveAdmin.Secret, "GET", "/v1/tokens", "", &tl)
	for _, tok := range tl.Tokens {
		if tok.Tenant != "umbrella" {
			t.Errorf("umbrella's admin lists token %s of tenant %s", tok.ID, tok.Tenant)
		}
	}
	// An admin of one tenant cannot mint tokens for another.
	if code, b := s.call(t, eveAdmin.Secret, "POST", "/v1/tokens", `{"scope":"admin","tenant":"acme"}`); code != http.StatusForbidden {
		t.Errorf("umbrella's admin minting for acme = %d %s, want 403", code, b)
	}
	if after := versions(t, s.dev.Backend.Store); after != before {
		t.Errorf("versions %d → %d after umbrella's attempts", before, after)
	}
	// Acme's session and run are untouched; acme's tokens still work.
	s.mustCall(t, http.StatusOK, acme.Secret, "GET", "/v1/runs/"+run.ID, "", &run)
	if run.Status != "succeeded" {
		t.Errorf("acme's run is %s after umbrella's cancel, want succeeded", run.Status)
	}
	s.mustCall(t, http.StatusOK, acmeAdmin.Secret, "GET", "/v1/tokens", "", &tl)
	for _, tok := range tl.Tokens {
		if tok.ID == acme.ID && tok.RevokedAt != nil {
			t.Error("umbrella revoked acme's token")
		}
	}
	// Acme streams its own run's events and reads its own files.
	if code, b := s.call(t, acme.Secret, "GET", "/v1/runs/"+run.ID+"/events", ""); code != http.StatusOK || !strings.Contains(string(b), "run.completed") {
		t.Errorf("acme's own events = %d %s, want 200 ending with run.completed", code, b)
	}
	if code, b := s.call(t, acme.Secret, "GET", "/v1/sessions/"+out+"/export", ""); code != http.StatusOK || !strings.Contains(string(b), "secret prompt") {
		t.Errorf("acme's own export = %d %s", code, b)
	}
	// Acme sees its own lists.
	s.mustCall(t, http.StatusOK, acme.Secret, "GET", "/v1/runs", "", &rl)
	if len(rl.Runs) != 1 {
		t.Errorf("acme lists %d runs, want 1", len(rl.Runs))
	}

}
