package coordinator_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/auth"
)

// TestMemoryTenantIsolation attacks tenant acme's memories with tenant
// umbrella's token through /v1/memory on Postgres: reading acme's item
// answers 404, listing and recalling acme's namespace come back empty,
// writing into it (over acme's item or beside it) answers 403, and no
// answer carries acme's text. acme's item is unchanged afterwards, and
// umbrella works in a namespace of its own. The operators' default tenant
// is confined the same way.
func TestMemoryTenantIsolation(t *testing.T) {
	t.Parallel()
	s := newAuthStack(t, "postgres", 0)
	acme := s.mint(t, auth.ScopeSubmit, "acme")
	eve := s.mint(t, auth.ScopeSubmit, "umbrella")
	eveRead := s.mint(t, auth.ScopeRead, "umbrella")
	const secret = "the launch code is swordfish"

	s.mustCall(t, http.StatusCreated, acme.Secret, "POST", "/v1/memory/items",
		`{"namespace":"acme-notes","uri":"memory://user/launch","text":"`+secret+`"}`, nil)
	var rc struct {
		Hits []struct {
			URI string `json:"uri"`
		} `json:"hits"`
	}
	s.mustCall(t, http.StatusOK, acme.Secret, "POST", "/v1/memory/recall", `{"namespace":"acme-notes","text":"launch code"}`, &rc)
	if len(rc.Hits) != 1 {
		t.Fatalf("acme recalls %d hits in its own namespace, want 1", len(rc.Hits))
	}

	for _, tc := range []struct {
		token, method, path, body string
		want                      int
	}{
		{eve.Secret, "GET", "/v1/memory/item?namespace=acme-notes&uri=memory://user/launch", "", http.StatusNotFound},
		{eve.Secret, "POST", "/v1/memory/items", `{"namespace":"acme-notes","uri":"memory://user/launch","text":"overwritten"}`, http.StatusForbidden},
		{eve.Secret, "POST", "/v1/memory/items", `{"namespace":"acme-notes","uri":"memory://user/planted","text":"planted"}`, http.StatusForbidden},
		{eveRead.Secret, "POST", "/v1/memory/items", `{"namespace":"umbrella-notes","uri":"memory://user/x","text":"x"}`, http.StatusForbidden},
		{bootstrap, "GET", "/v1/memory/item?namespace=acme-notes&uri=memory://user/launch", "", http.StatusNotFound},
	} {
		code, b := s.call(t, tc.token, tc.method, tc.path, tc.body)
		if code != tc.want {
			t.Errorf("%s %s %s = %d %s, want %d", tc.method, tc.path, tc.body, code, b, tc.want)
		}
		if strings.Contains(string(b), "swordfish") {
			t.Errorf("%s %s: the body carries acme's memory", tc.method, tc.path)
		}
	}
	for _, tok := range []string{eve.Secret, eveRead.Secret, bootstrap} {
		var l struct {
			Items []json.RawMessage `json:"items"`
		}
		code, b := s.call(t, tok, "GET", "/v1/memory/items?namespace=acme-notes&deleted=true", "")
		if err := json.Unmarshal(b, &l); code != http.StatusOK || err != nil || len(l.Items) != 0 {
			t.Errorf("another tenant lists acme's namespace: %d %s, want 200 and no items", code, b)
		}
		code, b = s.call(t, tok, "POST", "/v1/memory/recall", `{"namespace":"acme-notes","text":"launch code swordfish","top_k":10}`)
		if err := json.Unmarshal(b, &rc); code != http.StatusOK || err != nil || len(rc.Hits) != 0 {
			t.Errorf("another tenant recalls in acme's namespace: %d %s, want 200 and no hits", code, b)
		}
	}

	// acme's item is untouched; umbrella has a namespace of its own.
	var it struct {
		Text string `json:"text"`
	}
	s.mustCall(t, http.StatusOK, acme.Secret, "GET", "/v1/memory/item?namespace=acme-notes&uri=memory://user/launch", "", &it)
	if it.Text != secret {
		t.Errorf("acme's item after the attack reads %q, want %q", it.Text, secret)
	}
	var l struct {
		Items []json.RawMessage `json:"items"`
	}
	s.mustCall(t, http.StatusOK, acme.Secret, "GET", "/v1/memory/items?namespace=acme-notes&deleted=true", "", &l)
	if len(l.Items) != 1 {
		t.Errorf("acme's namespace holds %d items after the attack, want 1", len(l.Items))
	}
	s.mustCall(t, http.StatusCreated, eve.Secret, "POST", "/v1/memory/items", `{"namespace":"umbrella-notes","uri":"memory://user/x","text":"umbrella's note"}`, nil)
	s.mustCall(t, http.StatusOK, eveRead.Secret, "GET", "/v1/memory/item?namespace=umbrella-notes&uri=memory://user/x", "", nil)
	if code, b := s.call(t, acme.Secret, "GET", "/v1/memory/item?namespace=umbrella-notes&uri=memory://user/x", ""); code != http.StatusNotFound {
		t.Errorf("acme reading umbrella's item = %d %s, want 404", code, b)
	}
}
