package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/client"
)

func admin(t *testing.T, url string) *client.Client {
	t.Helper()
	cl, err := client.New(url, bootstrapToken)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func status(err error) int {
	var e *client.APIError
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// TestRunErrors: what a client gets for bad input and unknown runs: the
// field named, a 404 matching ErrNotFound, a 409 for what cannot be done.
func TestRunErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := admin(t, serverURL)

	if _, err := cl.SubmitAgent(ctx, api.SubmitRequest{Message: "hi"}); err == nil || !strings.Contains(err.Error(), "agent") {
		t.Errorf("submit without an agent: %v, want an error naming agent", err)
	}
	if _, err := cl.SubmitWorkflow(ctx, api.SubmitRequest{Message: "hi"}); err == nil || !strings.Contains(err.Error(), "workflow") {
		t.Errorf("submit a workflow without one: %v, want an error naming workflow", err)
	}
	_, err := cl.SubmitAgent(ctx, api.SubmitRequest{Agent: json.RawMessage(greeter), Message: "hi", Budget: api.Budget{MaxTokens: -1}})
	if status(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "budget.max_tokens") {
		t.Errorf("negative budget: %v, want 400 naming budget.max_tokens", err)
	}
	_, err = cl.SubmitAgent(ctx, api.SubmitRequest{Agent: json.RawMessage(greeter), Message: "hi", Timeout: "soon"})
	if status(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "timeout") {
		t.Errorf("bad timeout: %v, want 400 naming timeout", err)
	}
	for name, call := range map[string]func() error{
		"get":    func() error { _, err := cl.GetRun(ctx, "run_nope"); return err },
		"cancel": func() error { _, err := cl.CancelRun(ctx, "run_nope"); return err },
		"decide": func() error { _, err := cl.Approve(ctx, "run_nope", ""); return err },
		"wait":   func() error { _, err := cl.WaitRun(ctx, "run_nope"); return err },
	} {
		if err := call(); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("%s an unknown run: %v, want ErrNotFound", name, err)
		}
	}
	if _, err := cl.Reject(ctx, "run_nope", "", ""); err == nil || !strings.Contains(err.Error(), "reason") {
		t.Errorf("reject without a reason: %v, want an error naming reason", err)
	}

	run, err := cl.SubmitAgent(ctx, api.SubmitRequest{Agent: json.RawMessage(greeter), Message: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	final, err := cl.WaitRun(ctx, run.ID)
	if err != nil || final.Status != api.RunSucceeded || final.Output == nil || len(final.Steps) != 1 {
		t.Fatalf("WaitRun = %+v, %v; want succeeded with an output and its step", final, err)
	}
	if _, err := cl.Approve(ctx, run.ID, ""); status(err) != http.StatusConflict {
		t.Errorf("approve a run that waits for nothing: %v, want 409", err)
	}
	if _, err := cl.CancelRun(ctx, run.ID); status(err) != http.StatusConflict {
		t.Errorf("cancel an ended run: %v, want 409", err)
	}
	if _, err := cl.ListRuns(ctx, api.ListRunsParams{Limit: -1}); err == nil {
		t.Error("a negative limit is accepted")
	}
	l, err := cl.ListRuns(ctx, api.ListRunsParams{Status: api.RunSucceeded, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range l.Runs {
		found = found || r.ID == run.ID
		if r.Status != api.RunSucceeded {
			t.Errorf("list status=succeeded returned %s %s", r.ID, r.Status)
		}
	}
	if !found {
		t.Errorf("list status=succeeded misses run %s", run.ID)
	}
}

// TestTokens: list, create and revoke through the client; an unknown id
// is ErrNotFound.
func TestTokens(t *testing.T) {
	ctx := context.Background()
	cl := admin(t, serverURL)
	tok, err := cl.CreateToken(ctx, api.CreateTokenRequest{Name: "lister", Scope: api.ScopeSubmit, TTL: "1h"})
	if err != nil || !strings.HasPrefix(tok.Secret, "rath_") || tok.ExpiresAt == nil || tok.Scope != api.ScopeSubmit {
		t.Fatalf("create = %+v, %v", tok, err)
	}
	list, err := cl.ListTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range list {
		found = found || l.ID == tok.ID && l.Name == "lister" && l.RevokedAt == nil
	}
	if !found {
		t.Errorf("list %+v misses %s", list, tok.ID)
	}
	if _, err := cl.CreateToken(ctx, api.CreateTokenRequest{Scope: "root"}); status(err) != http.StatusBadRequest {
		t.Errorf("scope root: %v, want 400", err)
	}
	if _, err := cl.CreateToken(ctx, api.CreateTokenRequest{Scope: api.ScopeRead, TTL: "-1h"}); status(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "ttl") {
		t.Errorf("negative ttl: %v, want 400 naming ttl", err)
	}
	sub, err := client.New(serverURL, tok.Secret)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sub.ListTokens(ctx); status(err) != http.StatusForbidden {
		t.Errorf("a submit token lists tokens: %v, want 403", err)
	}
	r, err := cl.RevokeToken(ctx, tok.ID)
	if err != nil || r.RevokedAt == nil {
		t.Fatalf("revoke = %+v, %v", r, err)
	}
	if _, err := cl.RevokeToken(ctx, "tok_nope"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("revoke an unknown token: %v, want ErrNotFound", err)
	}
}

// TestRunsTenantConfinement: a token of tenant B sees none of tenant A's
// runs through any run method of the client, and cannot act on them; a
// read token of A cannot submit, cancel or decide.
func TestRunsTenantConfinement(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := newStack(t, testdb.Postgres(t))
	op := admin(t, s.URL)
	mint := func(tenant string, scope api.Scope) *client.Client {
		tok, err := op.CreateToken(ctx, api.CreateTokenRequest{Name: tenant + "-" + string(scope), Tenant: tenant, Scope: scope})
		if err != nil {
			t.Fatal(err)
		}
		cl, err := client.New(s.URL, tok.Secret)
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	a, b, aRead := mint("acme", api.ScopeAdmin), mint("bobco", api.ScopeAdmin), mint("acme", api.ScopeRead)

	done, err := a.SubmitAgent(ctx, api.SubmitRequest{Agent: json.RawMessage(greeter), Message: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if final, err := a.WaitRun(ctx, done.ID); err != nil || final.Status != api.RunSucceeded {
		t.Fatalf("tenant A's run: %+v, %v", final, err)
	}
	idle, err := a.SubmitAgent(ctx, api.SubmitRequest{Agent: json.RawMessage(greeter), Message: "hi", Queue: "nobody-listens"})
	if err != nil {
		t.Fatal(err)
	}
	// B's own version, to complete A's runs with.
	mine, err := b.SubmitAgent(ctx, api.SubmitRequest{Agent: json.RawMessage(greeter), Message: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	if mine, err = b.WaitRun(ctx, mine.ID); err != nil || mine.Output == nil {
		t.Fatalf("tenant B's run: %+v, %v", mine, err)
	}
	for _, id := range []string{done.ID, idle.ID} {
		for name, call := range map[string]func() error{
			"get":      func() error { _, err := b.GetRun(ctx, id); return err },
			"cancel":   func() error { _, err := b.CancelRun(ctx, id); return err },
			"decide":   func() error { _, err := b.Approve(ctx, id, ""); return err },
			"watch":    func() error { return b.Watch(ctx, id, func(api.Event) error { return nil }) },
			"wait":     func() error { _, err := b.WaitRun(ctx, id); return err },
			"step":     func() error { _, err := b.GetStep(ctx, id, "0", 0); return err },
			"complete": func() error { _, err := b.CompleteRun(ctx, id, *mine.Output); return err },
			"fail":     func() error { _, err := b.FailRun(ctx, id, "mine now"); return err },
		} {
			if err := call(); !errors.Is(err, client.ErrNotFound) {
				t.Errorf("tenant B %s tenant A's run %s: %v, want not found", name, id, err)
			}
		}
	}
	l, err := b.ListRuns(ctx, api.ListRunsParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range l.Runs {
		if r.ID == done.ID || r.ID == idle.ID {
			t.Errorf("tenant B lists tenant A's run %s", r.ID)
		}
	}
	if r, err := a.GetRun(ctx, idle.ID); err != nil || r.Status.Terminal() {
		t.Fatalf("tenant A's idle run after B's attempts: %+v, %v", r, err)
	}
	// A read token of A reads, and does nothing else.
	if _, err := aRead.GetRun(ctx, idle.ID); err != nil {
		t.Errorf("read token: get: %v", err)
	}
	if _, err := aRead.CancelRun(ctx, idle.ID); status(err) != http.StatusForbidden {
		t.Errorf("read token: cancel: %v, want 403", err)
	}
	if _, err := aRead.Approve(ctx, idle.ID, ""); status(err) != http.StatusForbidden {
		t.Errorf("read token: decide: %v, want 403", err)
	}
	if _, err := aRead.SubmitAgent(ctx, api.SubmitRequest{Agent: json.RawMessage(greeter), Message: "hi"}); status(err) != http.StatusForbidden {
		t.Errorf("read token: submit: %v, want 403", err)
	}
	if _, err := aRead.CreateToken(ctx, api.CreateTokenRequest{Scope: api.ScopeAdmin}); status(err) != http.StatusForbidden {
		t.Errorf("read token: create token: %v, want 403", err)
	}
	if _, err := a.CancelRun(ctx, idle.ID); err != nil {
		t.Fatal(err)
	}
}
