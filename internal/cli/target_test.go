package cli

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/store"
)

// migrated makes a SQLite store at path with `rathctl migrate` (the only
// command besides dev and demo that creates one) and returns its URL.
func migrated(t *testing.T, path string) string {
	t.Helper()
	u := "sqlite:" + path
	if code, _, errOut := rathctl(t, "", "migrate", "--store", u); code != 0 {
		t.Fatalf("migrate %s: exit %d: %s", u, code, errOut)
	}
	return u
}

// cleanTargetEnv clears every variable that chooses a target and points
// RATH_HOME at an empty directory (no saved login). Tests calling it do not
// run in parallel.
func cleanTargetEnv(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("RATH_HOME", home)
	for _, k := range []string{"RATH_SERVER", "RATH_TOKEN", "RATH_STORE"} {
		t.Setenv(k, "")
	}
	return home
}

// down is a coordinator URL nothing listens on.
const down = "http://127.0.0.1:1"

// TestChooseTarget is the rule table of chooseTarget: a store only when
// --store or RATH_STORE names one, else the coordinator from --server,
// RATH_SERVER, the saved login, the default; conflicts are usage errors.
func TestChooseTarget(t *testing.T) {
	home := cleanTargetEnv(t)
	type env struct{ store, server, token string }
	cases := []struct {
		name                      string
		env                       env
		storeFlag, server, token  string
		wantStore, wantServer, tk string
		usage                     bool
	}{
		{name: "nothing: the default coordinator", wantServer: defaultServer},
		{name: "--store", storeFlag: "sqlite:a.db", wantStore: "sqlite:a.db"},
		{name: "RATH_STORE", env: env{store: "sqlite:b.db"}, wantStore: "sqlite:b.db"},
		{name: "--store beats RATH_SERVER", env: env{server: "http://s:1"}, storeFlag: "sqlite:a.db", wantStore: "sqlite:a.db"},
		{name: "--server beats RATH_STORE", env: env{store: "sqlite:b.db"}, server: "http://f:1", wantServer: "http://f:1"},
		{name: "RATH_SERVER and RATH_TOKEN", env: env{server: "http://s:1", token: "rath_env"}, wantServer: "http://s:1", tk: "rath_env"},
		{name: "--token beats RATH_TOKEN", env: env{token: "rath_env"}, server: "http://f:1", token: "rath_flag", wantServer: "http://f:1", tk: "rath_flag"},
		{name: "--store and --server", storeFlag: "sqlite:a.db", server: "http://f:1", usage: true},
		{name: "RATH_STORE and RATH_SERVER", env: env{store: "sqlite:b.db", server: "http://s:1"}, usage: true},
	}
	for _, tc := range cases {
		t.Setenv("RATH_STORE", tc.env.store)
		t.Setenv("RATH_SERVER", tc.env.server)
		t.Setenv("RATH_TOKEN", tc.env.token)
		w, err := chooseTarget(tc.storeFlag, tc.server, tc.token)
		var ee *exitError
		if tc.usage {
			if !errors.As(err, &ee) || ee.code != 2 {
				t.Errorf("%s: err %v, want a usage error", tc.name, err)
			}
			continue
		}
		if err != nil || w.storeURL != tc.wantStore || w.server != tc.wantServer || w.token != tc.tk {
			t.Errorf("%s: %+v, %v; want store %q server %q token %q", tc.name, w, err, tc.wantStore, tc.wantServer, tc.tk)
		}
	}

	// The saved login comes after RATH_SERVER, before the default, and its
	// token goes to its server only.
	t.Setenv("RATH_STORE", "")
	t.Setenv("RATH_SERVER", "")
	t.Setenv("RATH_TOKEN", "")
	path, err := llm.ConfigPath(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(path, home) {
		t.Fatalf("config path %s is not under RATH_HOME %s", path, home)
	}
	raw, _ := json.Marshal(loginSection{URL: "http://saved:7420", Token: "rath_saved"})
	if err := llm.SaveConfig(path, &llm.Config{Other: map[string]json.RawMessage{"server": raw}}); err != nil {
		t.Fatal(err)
	}
	if w, err := chooseTarget("", "", ""); err != nil || w.server != "http://saved:7420" || w.token != "rath_saved" {
		t.Errorf("saved login: %+v, %v", w, err)
	}
	if w, err := chooseTarget("", "http://other:1", ""); err != nil || w.server != "http://other:1" || w.token != "" {
		t.Errorf("--server elsewhere got the saved token: %+v, %v", w, err)
	}
	t.Setenv("RATH_SERVER", "http://env:1")
	if w, err := chooseTarget("", "", ""); err != nil || w.server != "http://env:1" || w.token != "" {
		t.Errorf("RATH_SERVER beats the saved login: %+v, %v", w, err)
	}
}

// TestTargetRulesThroughCommands walks the rules with real commands: the
// environment alone picks a coordinator or a store, nothing creates a
// store, a missing coordinator or store file is named, and conflicts exit 2.
func TestTargetRulesThroughCommands(t *testing.T) {
	cleanTargetEnv(t)
	t.Chdir(t.TempDir())
	dir := t.TempDir()
	d, err := app.StartDev(context.Background(), app.DevConfig{Dir: filepath.Join(dir, "dev"), Addr: "127.0.0.1:0", Workers: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	db := migrated(t, filepath.Join(dir, "rath.db"))

	// RATH_SERVER alone: the coordinator.
	t.Setenv("RATH_SERVER", d.URL)
	var v store.Info
	okJSON(t, &v, "session", "new", "--user", "through the coordinator")
	if _, err := d.Backend.Store.Get(context.Background(), v.ID); err != nil {
		t.Fatalf("the version is not in the coordinator's store: %v", err)
	}
	okJSON(t, &v, "graph", v.ID.String())

	// RATH_STORE alone: that store.
	t.Setenv("RATH_SERVER", "")
	t.Setenv("RATH_STORE", db)
	okJSON(t, &v, "session", "new", "--user", "in the store")
	var page store.Page
	okJSON(t, &page, "session", "list")
	if len(page.Versions) != 1 || page.Versions[0].ID != v.ID {
		t.Fatalf("session list with RATH_STORE = %+v, want just %s", page.Versions, v.ID)
	}

	missing := filepath.Join(dir, "nowhere", "rath.db")
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		code int
		want []string
	}{
		{"both flags", nil, []string{"session", "list", "--store", db, "--server", d.URL}, 2, []string{"not both"}},
		{"both flags (lineage)", nil, []string{"blame", v.ID.String(), "--store", db, "--server", d.URL}, 2, []string{"not both"}},
		{"both flags (token)", nil, []string{"token", "list", "--store", db, "--server", d.URL}, 2, []string{"not both"}},
		{"both variables", map[string]string{"RATH_SERVER": d.URL}, []string{"session", "list"}, 2, []string{"RATH_STORE and RATH_SERVER"}},
		{"--server beats RATH_STORE", nil, []string{"session", "list", "--server", down}, 1,
			[]string{"no coordinator at " + down, `start one with "rathctl dev"`, "--server or RATH_SERVER", "--store"}},
		{"no coordinator (runs)", map[string]string{"RATH_STORE": "", "RATH_SERVER": down}, []string{"runs", "list"}, 1, []string{"no coordinator at " + down}},
		{"no coordinator (token)", map[string]string{"RATH_STORE": "", "RATH_SERVER": down}, []string{"token", "list"}, 1, []string{"no coordinator at " + down}},
		{"no coordinator (files)", map[string]string{"RATH_STORE": "", "RATH_SERVER": down}, []string{"session", "files", v.ID.String()}, 1, []string{"no coordinator at " + down}},
		{"missing store file", nil, []string{"session", "list", "--store", "sqlite:" + missing}, 1, []string{missing, "rathctl migrate"}},
		{"missing store file (lineage)", nil, []string{"blame", v.ID.String(), "--store", "sqlite:" + missing}, 1, []string{missing}},
		{"missing store file (dossier)", nil, []string{"dossier", "run_x", "--store", "sqlite:" + missing}, 1, []string{missing}},
		{"missing store file (memory)", nil, []string{"memory", "list", "--store", "sqlite:" + missing}, 1, []string{missing}},
		{"missing store file (check)", nil, []string{"check", "--store", "sqlite:" + missing}, 1, []string{missing}},
		{"missing store file (token)", nil, []string{"token", "list", "--store", "sqlite:" + missing}, 1, []string{missing}},
		{"store-only command without a store", map[string]string{"RATH_STORE": ""}, []string{"migrate"}, 2, []string{"--store URL or RATH_STORE"}},
		{"no coordinator (verify)", map[string]string{"RATH_STORE": "", "RATH_SERVER": down}, []string{"verify", "--all"}, 1, []string{"no coordinator at " + down}},
	} {
		for k, val := range tc.env {
			t.Setenv(k, val)
		}
		code, _, errOut := rathctl(t, "", tc.args...)
		if code != tc.code {
			t.Errorf("%s: rathctl %v: exit %d (%s), want %d", tc.name, tc.args, code, errOut, tc.code)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%s: stderr %q does not say %q", tc.name, errOut, w)
			}
		}
		t.Setenv("RATH_STORE", db)
		t.Setenv("RATH_SERVER", "")
	}
	if _, err := os.Stat(filepath.Dir(missing)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a command created %s: %v", filepath.Dir(missing), err)
	}
	if _, err := os.Stat(".rath"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a command created .rath in the working directory: %v", err)
	}
}

// TestExitCodes runs one real command per exit code (3, a watched run
// waiting for approval, is TestApproveRejectCommands' run --watch).
func TestExitCodes(t *testing.T) {
	cleanTargetEnv(t)
	db := migrated(t, filepath.Join(t.TempDir(), "rath.db"))
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"session", "new", "--user", "hi", "--store", db}, exitOK},
		{[]string{"session", "list", "--server", down}, exitFailed},
		{[]string{"session", "list", "--store", db, "-o", "yaml"}, exitUsage},
		{[]string{"session", "show", "--store", db}, exitUsage},
		{[]string{"session", "list", "--store", db, "--no-such-flag"}, exitUsage},
		{[]string{"session", "show", "0199a3a4-7d5c-7000-8000-000000000000", "--store", db}, exitNotFound},
		{[]string{"blame", "0199a3a4-7d5c-7000-8000-000000000000", "--store", db}, exitNotFound},
		{[]string{"runs", "show", "run_nope", "--server", down}, exitFailed},
	} {
		if code, _, errOut := rathctl(t, "", tc.args...); code != tc.code {
			t.Errorf("rathctl %v: exit %d (%s), want %d", tc.args, code, errOut, tc.code)
		}
	}
}

// commands lists every command below c (c included), skipping cobra's own
// help and completion.
func commands(c *cobra.Command) []*cobra.Command {
	if c.Name() == "help" || c.Name() == "completion" {
		return nil
	}
	out := []*cobra.Command{c}
	for _, s := range c.Commands() {
		out = append(out, commands(s)...)
	}
	return out
}

func hasFlag(c *cobra.Command, name string) bool {
	return c.Flags().Lookup(name) != nil || c.PersistentFlags().Lookup(name) != nil || c.InheritedFlags().Lookup(name) != nil
}

// TestEveryCommandDocumentedWithOutput walks the command tree: every
// command has a section in docs/cli.md, and every runnable one takes -o
// and refuses an unknown format with exit 2.
func TestEveryCommandDocumentedWithOutput(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range commands(newRoot(&Env{})) {
		path := c.CommandPath()
		if !strings.Contains(string(doc), "`"+path+"`") && !strings.Contains(string(doc), "`"+path+" ") {
			t.Errorf("docs/cli.md does not mention `%s`", path)
		}
		if !c.Runnable() {
			continue
		}
		if !hasFlag(c, "output") {
			t.Errorf("%s takes no -o/--output", path)
			continue
		}
		args := strings.Fields(path)[1:]
		args = append(args, "-o", "yaml")
		// Give it the arguments it wants: -o is refused before it runs.
		for n := 0; n <= 3; n++ {
			code, _, errOut := rathctl(t, "", args...)
			if code == 2 && strings.Contains(errOut, `"yaml"`) {
				break
			}
			if n == 3 {
				t.Errorf("%s -o yaml: exit %d (%s), want 2 refusing yaml", path, code, errOut)
			}
			args = append(args, "x")
		}
	}
}
