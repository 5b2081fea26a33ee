package coordinator_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/auth"
	"github.com/rath-run/rath/pkg/api"
)

// TestAdminTenantIsolation attacks tenant acme's versions through gc,
// pins, redaction, check and memory with tenant umbrella's tokens on
// Postgres: read and submit tokens are refused the admin endpoints (403);
// umbrella's admin cannot pin, unpin or redact acme's versions (404, as
// for no version), does not see acme's pins or redactions, checks only its
// own rows, and its gc deletes only its own unkept versions; umbrella
// cannot commit acme's transcript to memory, name acme's version as a
// writer, or delete acme's memory. Acme's own admin does all of it on its
// rows, and its redaction takes effect at once.
func TestAdminTenantIsolation(t *testing.T) {
	t.Parallel()
	s := newAuthStack(t, "postgres", -1)
	acme := s.mint(t, auth.ScopeSubmit, "acme")
	acmeAdmin := s.mint(t, auth.ScopeAdmin, "acme")
	acmeRead := s.mint(t, auth.ScopeRead, "acme")
	eve := s.mint(t, auth.ScopeSubmit, "umbrella")
	eveAdmin := s.mint(t, auth.ScopeAdmin, "umbrella")
	const secret = "acme's card is 4111 1111 1111 1111"

	var kept, loose, own struct {
		ID string `json:"id"`
	}
	s.mustCall(t, http.StatusCreated, acme.Secret, "POST", "/v1/sessions", `{"system":"be brief","user":"`+secret+`"}`, &kept)
	s.mustCall(t, http.StatusCreated, acme.Secret, "POST", "/v1/sessions", `{"user":"acme's loose branch"}`, &loose)
	s.mustCall(t, http.StatusCreated, eve.Secret, "POST", "/v1/sessions", `{"user":"umbrella's own"}`, &own)
	s.mustCall(t, http.StatusCreated, acme.Secret, "POST", "/v1/memory/items",
		`{"namespace":"acme-notes","uri":"memory://user/card","text":"acme's note","version_id":"`+kept.ID+`"}`, nil)

	// Scopes: read and submit tokens may not use the admin endpoints.
	adminRoutes := []struct{ method, path, body string }{
		{"POST", "/v1/admin/gc", `{"keep":"1ns"}`},
		{"POST", "/v1/admin/check", `{}`},
		{"POST", "/v1/versions/" + kept.ID + "/redact", `{"chunk":1,"reason":"x"}`},
		{"POST", "/v1/versions/" + kept.ID + "/pin", `{}`},
		{"DELETE", "/v1/versions/" + kept.ID + "/pin", ""},
	}
	for _, tok := range []string{acmeRead.Secret, acme.Secret} {
		for _, tc := range adminRoutes {
			if code, b := s.call(t, tok, tc.method, tc.path, tc.body); code != http.StatusForbidden {
				t.Errorf("non-admin %s %s = %d %s, want 403", tc.method, tc.path, code, b)
			}
		}
	}
	s.mustCall(t, http.StatusOK, acmeRead.Secret, "GET", "/v1/pins", "", nil)
	s.mustCall(t, http.StatusOK, acmeRead.Secret, "GET", "/v1/redactions", "", nil)

	// Acme's admin pins and redacts its own version.
	var pin api.PinReply
	s.mustCall(t, http.StatusOK, acmeAdmin.Secret, "POST", "/v1/versions/"+kept.ID+"/pin", `{"note":"audit"}`, &pin)
	if !pin.Pinned || pin.ID.String() != kept.ID {
		t.Fatalf("pin: %+v", pin)
	}
	var red api.RedactReply
	s.mustCall(t, http.StatusOK, acmeAdmin.Secret, "POST", "/v1/versions/"+kept.ID+"/redact", `{"chunk":1,"reason":"PAN"}`, &red)
	if len(red.Redactions) != 1 || red.Redactions[0].Version.String() != kept.ID {
		t.Fatalf("redact: %+v", red)
	}
	if code, b := s.call(t, acme.Secret, "GET", "/v1/sessions/"+kept.ID+"/transcript", ""); code != http.StatusOK || strings.Contains(string(b), "4111") {
		t.Fatalf("acme's transcript after redact = %d %s, want 200 without the card number", code, b)
	}

	// Umbrella's admin cannot act on acme's versions.
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/v1/versions/" + kept.ID + "/pin", `{"note":"mine"}`},
		{"POST", "/v1/versions/" + loose.ID + "/pin", `{"note":"mine"}`},
		{"DELETE", "/v1/versions/" + kept.ID + "/pin", ""},
		{"POST", "/v1/versions/" + loose.ID + "/redact", `{"chunk":0,"reason":"vandalism"}`},
		{"POST", "/v1/memory/commit", `{"namespace":"umbrella-notes","version":"` + kept.ID + `"}`},
		{"POST", "/v1/memory/items", `{"namespace":"umbrella-notes","uri":"memory://user/x","text":"x","version_id":"` + kept.ID + `"}`},
		{"DELETE", "/v1/memory/item?namespace=acme-notes&uri=memory://user/card", ""},
	} {
		code, b := s.call(t, eveAdmin.Secret, tc.method, tc.path, tc.body)
		if code != http.StatusNotFound {
			t.Errorf("umbrella's admin %s %s = %d %s, want 404", tc.method, tc.path, code, b)
		}
		if strings.Contains(string(b), "acme's") {
			t.Errorf("umbrella's admin %s %s: the body carries acme's content: %s", tc.method, tc.path, b)
		}
	}
	var pins api.PinList
	s.mustCall(t, http.StatusOK, eveAdmin.Secret, "GET", "/v1/pins", "", &pins)
	if len(pins.Pins) != 0 {
		t.Errorf("umbrella lists acme's pins: %+v", pins.Pins)
	}
	var rl api.RedactionList
	s.mustCall(t, http.StatusOK, eveAdmin.Secret, "GET", "/v1/redactions", "", &rl)
	if len(rl.Redactions) != 0 || len(rl.Problems) != 0 {
		t.Errorf("umbrella lists acme's redactions: %+v", rl)
	}
	var rep api.CheckReport
	s.mustCall(t, http.StatusOK, eveAdmin.Secret, "POST", "/v1/admin/check", `{}`, &rep)
	if rep.Versions != 1 || !rep.OK() {
		t.Errorf("umbrella's check: %+v, want its own 1 version and no problem", rep)
	}
	// Umbrella's gc deletes its own unkept version, none of acme's.
	var gc api.GCReport
	s.mustCall(t, http.StatusOK, eveAdmin.Secret, "POST", "/v1/admin/gc", `{"keep":"1ns"}`, &gc)
	if gc.Versions != 1 {
		t.Errorf("umbrella's gc freed %d versions, want its own 1", gc.Versions)
	}
	s.mustCall(t, http.StatusNotFound, eve.Secret, "GET", "/v1/sessions/"+own.ID, "", nil)
	s.mustCall(t, http.StatusOK, acme.Secret, "GET", "/v1/sessions/"+loose.ID, "", nil)
	s.mustCall(t, http.StatusOK, acme.Secret, "GET", "/v1/memory/item?namespace=acme-notes&uri=memory://user/card", "", nil)

	// Acme sees its own pin and redaction, and its check covers both
	// versions; its gc dry run would free the loose branch only (the
	// pinned version and the memory's writer stay).
	s.mustCall(t, http.StatusOK, acmeRead.Secret, "GET", "/v1/pins", "", &pins)
	if len(pins.Pins) != 1 || pins.Pins[0].ID.String() != kept.ID || pins.Pins[0].Note != "audit" {
		t.Errorf("acme's pins: %+v", pins.Pins)
	}
	s.mustCall(t, http.StatusOK, acmeRead.Secret, "GET", "/v1/redactions", "", &rl)
	if len(rl.Redactions) != 1 || rl.Redactions[0].Reason != "PAN" || len(rl.Problems) != 0 {
		t.Errorf("acme's redactions: %+v", rl)
	}
	s.mustCall(t, http.StatusOK, acmeAdmin.Secret, "POST", "/v1/admin/check", `{}`, &rep)
	if rep.Versions != 2 || !rep.OK() {
		t.Errorf("acme's check: %+v", rep)
	}
	s.mustCall(t, http.StatusOK, acmeAdmin.Secret, "POST", "/v1/admin/gc", `{"keep":"1ns","dry_run":true}`, &gc)
	if gc.Versions != 1 || !gc.DryRun {
		t.Errorf("acme's gc dry run: %+v, want 1 version", gc)
	}
	// Bad input names the field.
	for _, tc := range []struct{ path, body, field string }{
		{"/v1/admin/gc", `{"keep":"soon"}`, "keep"},
		{"/v1/admin/gc", `{}`, "keep"},
		{"/v1/versions/" + kept.ID + "/redact", `{"chunk":0}`, "reason"},
		{"/v1/versions/" + kept.ID + "/redact", `{"chunk":-1,"reason":"x"}`, "chunk"},
		{"/v1/versions/" + kept.ID + "/redact", `{"chunk":7,"reason":"x"}`, "chunk"},
		{"/v1/memory/commit", `{"version":"nope"}`, "version"},
	} {
		code, b := s.call(t, acmeAdmin.Secret, "POST", tc.path, tc.body)
		if code != http.StatusBadRequest || !strings.Contains(string(b), tc.field) {
			t.Errorf("POST %s %s = %d %s, want 400 naming %s", tc.path, tc.body, code, b, tc.field)
		}
	}
	if code, b := s.call(t, acmeAdmin.Secret, "POST", "/v1/versions/"+kept.ID+"/redact", `{"chunk":1,"reason":"again"}`); code != http.StatusConflict {
		t.Errorf("second redaction = %d %s, want 409", code, b)
	}
	// Acme commits its own transcript (the redacted text) and deletes its note.
	var mc api.MemoryCommitReply
	s.mustCall(t, http.StatusCreated, acme.Secret, "POST", "/v1/memory/commit", `{"namespace":"acme-notes","version":"`+kept.ID+`"}`, &mc)
	if mc.Transcript.VersionID != kept.ID || strings.Contains(mc.Transcript.Text, "4111") {
		t.Errorf("acme's commit: %+v", mc.Transcript)
	}
	var del api.MemoryDeleteReply
	s.mustCall(t, http.StatusOK, acme.Secret, "DELETE", "/v1/memory/item?namespace=acme-notes&uri=memory://user/card&version="+kept.ID, "", &del)
	if del.Deleted != "memory://user/card" {
		t.Errorf("acme's delete: %+v", del)
	}
}
