package cli

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/coordinator"
)

// TestTokenAndLogin is the operator's path: mint the first admin token with
// store access, log in with it (stored 0600, sent only to its server), mint
// a read token through the API, and see a revoked token refused. It sets
// RATH_HOME, so it does not run in parallel.
func TestTokenAndLogin(t *testing.T) {
	home := t.TempDir()
	t.Setenv("RATH_HOME", home)
	t.Setenv("RATH_SERVER", "")
	t.Setenv("RATH_TOKEN", "")
	t.Setenv("RATH_STORE", "")
	dir := t.TempDir()
	storeURL := "sqlite:" + filepath.Join(dir, "rath.db")
	d, err := app.StartDev(context.Background(), app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", Workers: -1, StoreURL: storeURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	tokens, err := d.Backend.TokenStore()
	if err != nil {
		t.Fatal(err)
	}
	c, err := coordinator.New(d.Backend.Store, d.Backend.Runs, d.Backend.Bus, coordinator.Config{RequireAuth: true, Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)

	run := func(wantCode int, stdin string, args ...string) (string, string) {
		t.Helper()
		code, out, errOut := rathctl(t, stdin, args...)
		if code != wantCode {
			t.Fatalf("rathctl %v: exit %d, want %d: %s %s", args, code, wantCode, out, errOut)
		}
		return out, errOut
	}

	// Without a token the API refuses.
	_, errOut := run(1, "", "runs", "list", "--server", srv.URL)
	if !strings.Contains(errOut, "401") {
		t.Fatalf("runs list without a token: %s", errOut)
	}
	// The first admin token, with store access.
	out, note := run(0, "", "token", "create", "--store", storeURL, "--scope", "admin", "--name", "ops")
	admin := strings.TrimSpace(out)
	if !strings.HasPrefix(admin, "rath_") || !strings.Contains(note, "not shown again") {
		t.Fatalf("token create printed %q / %q", out, note)
	}
	run(2, "", "token", "create", "--store", storeURL, "--scope", "root")
	// Login: the token comes from stdin, is checked, and lands in the
	// config file with mode 0600.
	out, _ = run(0, admin+"\n", "login", "--server", srv.URL)
	if !strings.Contains(out, "scope admin") || strings.Contains(out, admin) {
		t.Fatalf("login printed %q", out)
	}
	file := filepath.Join(home, "config.yaml")
	st, err := os.Stat(file)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("config file: %v, mode %v", err, st.Mode().Perm())
	}
	run(1, "rath_"+strings.Repeat("x", 43)+"\n", "login", "--server", srv.URL)
	// rathctl now sends the stored token to that server, and only to it.
	if got := apiToken("", srv.URL+"/"); got != admin {
		t.Error("the logged-in token is not sent to the logged-in server")
	}
	if got := apiToken("", "http://evil.example"); got != "" {
		t.Error("the logged-in token would be sent to another server")
	}
	run(0, "", "runs", "list", "--server", srv.URL)
	out, _ = run(0, "", "token", "create", "--scope", "read", "--name", "viewer", "--server", srv.URL)
	read := strings.TrimSpace(out)
	out, _ = run(0, "", "token", "list", "--server", srv.URL)
	if !strings.Contains(out, "viewer") || !strings.Contains(out, "ops") || strings.Contains(out, read) || strings.Contains(out, admin) {
		t.Fatalf("token list:\n%s", out)
	}
	// A read token cannot mint.
	_, errOut = run(1, "", "token", "create", "--scope", "admin", "--server", srv.URL, "--token", read)
	if !strings.Contains(errOut, "403") {
		t.Fatalf("read token minting: %s", errOut)
	}
	// Revoked: refused at once.
	list, err := tokens.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var opsID string
	for _, tok := range list {
		if tok.Name == "ops" {
			opsID = tok.ID
		}
	}
	out, errOut = run(0, "", "token", "revoke", opsID, "--store", storeURL)
	if !strings.Contains(out, "revoked "+opsID) {
		t.Fatalf("revoke printed %q", out)
	}
	// Revoked behind the coordinators' backs: the user is told what a
	// coordinator's token cache means for it.
	if !strings.Contains(errOut, "no coordinator was told") || !strings.Contains(errOut, "--token-cache") {
		t.Fatalf("revoke --store said %q on stderr, want the token cache's caveat", errOut)
	}
	_, errOut = run(1, "", "runs", "list", "--server", srv.URL)
	if !strings.Contains(errOut, "401") || strings.Contains(errOut, admin) {
		t.Fatalf("runs list with a revoked token: %s", errOut)
	}
}
