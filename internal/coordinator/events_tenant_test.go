package coordinator_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/auth"
	"github.com/rath-run/rath/internal/bus"
)

// TestRunEventsTenantIsolation watches tenant acme's live run from tenant
// umbrella while its events flow: acme's own stream delivers the event
// (so events do flow), and umbrella's submit and read tokens, and the
// default tenant's bootstrap token, get 404 with a JSON error body and no
// event bytes: no SSE frame, nothing of the event's payload, not even the
// event type.
func TestRunEventsTenantIsolation(t *testing.T) {
	t.Parallel()
	s := newAuthStack(t, "postgres", -1) // no worker: the run stays pending (0 would start 2)
	acme := s.mint(t, auth.ScopeSubmit, "acme")
	eve := s.mint(t, auth.ScopeSubmit, "umbrella")
	eveRead := s.mint(t, auth.ScopeRead, "umbrella")

	var sess, run struct {
		ID string `json:"id"`
	}
	s.mustCall(t, http.StatusCreated, acme.Secret, "POST", "/v1/sessions", `{"user":"hello"}`, &sess)
	s.mustCall(t, http.StatusCreated, acme.Secret, "POST", "/v1/runs", `{"agent":`+spec+`,"session":"`+sess.ID+`"}`, &run)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/v1/runs/"+run.ID+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+acme.Secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("acme watching its own run: %d", resp.StatusCode)
	}
	// The handler subscribed before it sent the headers: publish now.
	const payload = "acme-confidential-progress"
	data, err := json.Marshal(map[string]string{"note": payload})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.dev.Backend.Bus.PublishEvent(ctx, bus.Event{RunID: run.ID, Type: "step.note_probe", Time: time.Now(), Data: data}); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	seen := false
	for !seen && sc.Scan() {
		seen = strings.HasPrefix(sc.Text(), "data: ") && strings.Contains(sc.Text(), payload)
	}
	if !seen {
		t.Fatalf("acme's stream ended without the published event: %v", sc.Err())
	}

	for _, tok := range []string{eve.Secret, eveRead.Secret, bootstrap} {
		code, b := s.call(t, tok, "GET", "/v1/runs/"+run.ID+"/events", "")
		if code != http.StatusNotFound {
			t.Errorf("another tenant watching acme's run = %d %s, want 404", code, b)
		}
		var body struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(b, &body); err != nil || body.Error.Code != "not_found" {
			t.Errorf("another tenant watching acme's run: body %q is not a not_found error (%v)", b, err)
		}
		for _, leak := range []string{"event:", "data:", payload, "note_probe"} {
			if strings.Contains(string(b), leak) {
				t.Errorf("another tenant watching acme's run: the body carries %q: %s", leak, b)
			}
		}
	}
}
