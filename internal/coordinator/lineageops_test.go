package coordinator_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/auth"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/session"
)

// TestLineageOpsThroughTheAPI verifies, writes the dossier of and replays
// tenant acme's run through the API on Postgres with the typed client,
// then attacks the same endpoints with tenant umbrella's tokens (404, not
// a byte of acme's content, nothing written) and with acme's read-only
// token (replay writes: 403).
func TestLineageOpsThroughTheAPI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newAuthStack(t, "postgres", 1)
	acme := s.mint(t, auth.ScopeSubmit, "acme")
	acmeRead := s.mint(t, auth.ScopeRead, "acme")
	eve := s.mint(t, auth.ScopeSubmit, "umbrella")
	eveAdmin := s.mint(t, auth.ScopeAdmin, "umbrella")

	sessID, run := s.succeededRun(t, acme.Secret)
	out, err := session.ParseID(*run.Output)
	if err != nil {
		t.Fatal(err)
	}

	cl, err := client.New(s.url, acme.Secret)
	if err != nil {
		t.Fatal(err)
	}
	// Verify: the output's chain, and the whole tenant.
	rep, err := cl.Verify(ctx, out)
	if err != nil || !rep.OK || rep.ID != out.String() || rep.Versions < 2 || rep.Chunks < 3 || len(rep.Problems) != 0 {
		t.Errorf("acme verify %s = %+v, %v", out, rep, err)
	}
	all, err := cl.VerifyAll(ctx)
	if err != nil || !all.OK || all.Versions < 2 || all.Problems == nil {
		t.Errorf("acme verify all = %+v, %v", all, err)
	}
	if _, err := cl.Verify(ctx, session.NewID()); !errors.Is(err, client.ErrNotFound) || !errors.Is(err, session.ErrNotFound) {
		t.Errorf("verify of a missing version: %v, want not found", err)
	}
	// Umbrella's whole-tenant verify sees none of acme's versions: it
	// checked nothing, and says so (not OK).
	eveCl, err := client.New(s.url, eve.Secret)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := eveCl.VerifyAll(ctx); err != nil || r.OK || r.Versions != 0 || !strings.Contains(r.Summary(), "nothing was checked") {
		t.Errorf("umbrella verify all = %+v %q, %v; want 0 versions, not OK", r, r.Summary(), err)
	}

	// Dossier: markdown, HTML and data.
	var md bytes.Buffer
	if err := cl.Dossier(ctx, run.ID, client.DossierOptions{Prices: []string{"scripted=1/2"}}, &md); err != nil || !strings.Contains(md.String(), run.ID) {
		t.Errorf("dossier md: %v\n%s", err, md.String())
	}
	var html bytes.Buffer
	if err := cl.Dossier(ctx, run.ID, client.DossierOptions{Format: api.DossierHTML}, &html); err != nil || !strings.Contains(html.String(), "<html") {
		t.Errorf("dossier html: %v\n%.300s", err, html.String())
	}
	d, err := cl.DossierData(ctx, run.ID, nil)
	if err != nil || d.Output == nil || d.Output.Version != out || d.Status != "succeeded" || d.Run.ID != run.ID {
		t.Errorf("dossier data = %+v, %v", d, err)
	}
	for _, q := range []string{"?format=pdf", "?price=x=1"} {
		if code, b := s.call(t, acme.Secret, "GET", "/v1/runs/"+run.ID+"/dossier"+q, ""); code != http.StatusBadRequest {
			t.Errorf("dossier %s = %d %s, want 400", q, code, b)
		}
	}
	if err := cl.Dossier(ctx, "run-nope", client.DossierOptions{}, &md); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("dossier of a missing run: %v, want not found", err)
	}

	// Attacks, before acme's replay: umbrella gets 404 on acme's version and
	// run and writes nothing; acme's read-only token cannot replay.
	before := versions(t, s.dev.Backend.Store)
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/v1/sessions/" + out.String() + "/verify", ""},
		{"GET", "/v1/runs/" + run.ID + "/dossier", ""},
		{"GET", "/v1/runs/" + run.ID + "/dossier?format=md", ""},
		{"GET", "/v1/runs/" + run.ID + "/dossier?format=html", ""},
		{"POST", "/v1/versions/" + out.String() + "/replay", `{}`},
		{"POST", "/v1/versions/" + out.String() + "/replay", `{"strict":true}`},
		{"POST", "/v1/runs/" + run.ID + "/replay", `{"strict":true}`},
		{"POST", "/v1/runs/" + run.ID + "/rerun", `{"from":"0","model":"scripted"}`},
	} {
		for _, tok := range []string{eve.Secret, eveAdmin.Secret} {
			code, b := s.call(t, tok, tc.method, tc.path, tc.body)
			if code != http.StatusNotFound {
				t.Errorf("umbrella %s %s = %d %s, want 404", tc.method, tc.path, code, b)
			}
			if strings.Contains(string(b), "secret prompt") || strings.Contains(string(b), "hello") {
				t.Errorf("umbrella %s %s: the body carries acme's content: %s", tc.method, tc.path, b)
			}
		}
	}
	if code, b := s.call(t, acmeRead.Secret, "POST", "/v1/versions/"+out.String()+"/replay", `{}`); code != http.StatusForbidden {
		t.Errorf("read-only replay = %d %s, want 403", code, b)
	}
	for _, path := range []string{"/v1/runs/" + run.ID + "/replay", "/v1/runs/" + run.ID + "/rerun"} {
		if code, b := s.call(t, acmeRead.Secret, "POST", path, `{"from":"0"}`); code != http.StatusForbidden {
			t.Errorf("read-only POST %s = %d %s, want 403", path, code, b)
		}
	}
	if after := versions(t, s.dev.Backend.Store); after != before {
		t.Errorf("the attacks wrote %d versions", after-before)
	}
	// Whole-run replay and rerun are for workflow runs: an agent run is
	// 400, naming what to do instead.
	if _, err := cl.ReplayRun(ctx, run.ID, api.RunReplayRequest{}); err == nil || !strings.Contains(err.Error(), "agent run") {
		t.Errorf("replay --run of an agent run: %v, want 400 naming it", err)
	}
	if _, err := cl.RerunRun(ctx, run.ID, api.RunRerunRequest{From: "0"}); err == nil || !strings.Contains(err.Error(), "not a workflow file") {
		t.Errorf("rerun --run of an agent run: %v, want 400 naming it", err)
	}

	// Replay: strict, in the coordinator, identical hashes, a new version
	// of acme's on the step's input.
	rp, err := cl.Replay(ctx, out, api.ReplayRequest{Strict: true})
	if err != nil || !rp.Identical || rp.Replay == nil || rp.Of != out || len(rp.Divergences) != 0 {
		t.Fatalf("replay = %+v, %v", rp, err)
	}
	v, err := cl.Graph().Get(ctx, *rp.Replay)
	if err != nil || v.Op != session.OpReplay || len(v.Parents) != 1 || v.Parents[0].String() != sessID {
		t.Errorf("replay version = %+v, %v; want op replay on %s", v, err, sessID)
	}
	if code, _ := s.call(t, eve.Secret, "GET", "/v1/versions/"+rp.Replay.String(), ""); code != http.StatusNotFound {
		t.Errorf("umbrella reads acme's replay version: %d, want 404", code)
	}
	// The input was not made by a step: 400, naming why.
	if _, err := cl.Replay(ctx, v.Parents[0], api.ReplayRequest{}); err == nil || !strings.Contains(err.Error(), "not by an agent step") {
		t.Errorf("replay of the input: %v, want not by an agent step", err)
	}
}
