package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/store"
)

// rathctl runs one command in-process and returns its exit code and output.
func rathctl(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

// okJSON runs a command with --output json and decodes its output into v.
func okJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	code, out, errOut := rathctl(t, "", append(args, "--output", "json")...)
	if code != 0 {
		t.Fatalf("rathctl %v: exit %d: %s", args, code, errOut)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("rathctl %v: output %q: %v", args, out, err)
	}
}

// TestSessionCommands runs every session command against a store directly
// (--store) and through a coordinator's API (--server): one implementation
// of each command, two graphs behind it.
func TestSessionCommands(t *testing.T) {
	t.Parallel()
	t.Run("store", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		stores := map[string]string{}
		sessionCommands(t, dir, func(name string) []string {
			if stores[name] == "" {
				stores[name] = migrated(t, filepath.Join(dir, name+".db"))
			}
			return []string{"--store", stores[name]}
		})
	})
	t.Run("server", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		servers := map[string]string{}
		for _, name := range []string{"rath", "other", "third"} {
			sd := filepath.Join(dir, name)
			d, err := app.StartDev(context.Background(), app.DevConfig{Dir: sd, Addr: "127.0.0.1:0", Workers: -1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(d.Close)
			servers[name] = d.URL
		}
		sessionCommands(t, dir, func(name string) []string { return []string{"--server", servers[name]} })
	})
}

// sessionCommands drives the session commands; graph returns the flags
// that select one of three independent graphs: "rath", "other", "third".
func sessionCommands(t *testing.T, dir string, graph func(name string) []string) {
	db := graph("rath")
	var root, a, b, fork, merged, detached store.Info
	okJSON(t, &root, with(db, "session", "new", "--system", "be brief", "--user", "plan a trip")...)
	if root.Op != "create" || root.Len != 2 || len(root.Parents) != 0 {
		t.Fatalf("new = %+v", root)
	}
	okJSON(t, &a, with(db, "session", "append", root.ID.String(), "--assistant", "Kyoto")...)
	okJSON(t, &fork, with(db, "session", "fork", root.ID.String())...)
	if fork.Op != "fork" || fork.Len != 2 || fork.OwnChunks != 0 || fork.Parents[0] != root.ID {
		t.Fatalf("fork = %+v", fork)
	}
	okJSON(t, &b, with(db, "session", "append", fork.ID.String(), "--assistant", "Osaka")...)
	okJSON(t, &merged, with(db, "session", "merge", a.ID.String(), b.ID.String())...)
	if merged.Op != "merge" || merged.Len != 4 || len(merged.Parents) != 2 {
		t.Fatalf("merge = %+v", merged)
	}
	okJSON(t, &detached, with(db, "session", "detach", merged.ID.String())...)
	if detached.Op != "detach" || len(detached.Parents) != 0 || detached.Len != 4 {
		t.Fatalf("detach = %+v", detached)
	}
	var placed store.Info
	okJSON(t, &placed, with(db, "session", "place", detached.ID.String(), "--backend", "docker", "--image", "rath-sandbox:busybox")...)
	if placed.Op != "place" || placed.Placement.Backend != "docker" || placed.Placement.Spec.Image != "rath-sandbox:busybox" || placed.Len != 4 || len(placed.Parents) != 1 || placed.Parents[0] != detached.ID {
		t.Fatalf("place = %+v", placed)
	}
	if code, _, errOut := rathctl(t, "", with(db, "session", "place", detached.ID.String(), "--backend", "vm")...); code != 2 || !strings.Contains(errOut, "backend") {
		t.Fatalf("place --backend vm: exit %d %s, want 2 naming backend", code, errOut)
	}

	code, out, errOut := rathctl(t, "", with(db, "session", "show", merged.ID.String())...)
	if code != 0 {
		t.Fatalf("show: %d %s", code, errOut)
	}
	for _, want := range []string{"system: be brief", "user: plan a trip", "assistant: Kyoto", "assistant: Osaka"} {
		if !strings.Contains(out, want) {
			t.Fatalf("show output lacks %q:\n%s", want, out)
		}
	}
	var shown struct {
		Version    store.Info        `json:"version"`
		Transcript []json.RawMessage `json:"transcript"`
	}
	okJSON(t, &shown, with(db, "session", "show", merged.ID.String())...)
	if shown.Version.ID != merged.ID || len(shown.Transcript) != 4 {
		t.Fatalf("show json = %+v", shown)
	}

	var log api.Relatives
	okJSON(t, &log, with(db, "session", "log", merged.ID.String())...)
	if anc := log.Versions; log.ID != merged.ID || len(anc) != 4 || anc[0].Depth != 1 || anc[len(anc)-1].ID != root.ID {
		t.Fatalf("log = %+v", log)
	}

	var page store.Page
	okJSON(t, &page, with(db, "session", "list", "--roots")...)
	if len(page.Versions) != 2 || page.Versions[0].ID != root.ID || page.Versions[1].ID != detached.ID {
		t.Fatalf("list --roots = %+v", page)
	}
	code, out, _ = rathctl(t, "", with(db, "session", "list", "--limit", "2")...)
	if code != 0 || strings.Count(out, "\n") != 3 || !strings.Contains(out, "next page: --after ") {
		t.Fatalf("list --limit 2: %d %q", code, out)
	}

	// Export from this store, import into another, same transcript.
	code, exported, errOut := rathctl(t, "", with(db, "session", "export", merged.ID.String())...)
	if code != 0 {
		t.Fatalf("export: %d %s", code, errOut)
	}
	file := filepath.Join(dir, "merged.jsonl")
	if err := os.WriteFile(file, []byte(exported), 0o600); err != nil {
		t.Fatal(err)
	}
	other := graph("other")
	var imported store.Info
	okJSON(t, &imported, with(other, "session", "import", file)...)
	if imported.Len != 4 || imported.Hash == "" {
		t.Fatalf("import = %+v", imported)
	}
	okJSON(t, &shown, with(other, "session", "show", imported.ID.String())...)
	if len(shown.Transcript) != 4 {
		t.Fatalf("imported transcript has %d chunks", len(shown.Transcript))
	}
	code, out, _ = rathctl(t, exported, append([]string{"session", "import", "-"}, graph("third")...)...)
	if code != 0 || !strings.Contains(out, "len=4") {
		t.Fatalf("import from stdin: %d %q", code, out)
	}

	// show prints the whole transcript; --short cuts each chunk to a line.
	long := strings.Repeat("a long plan, ", 20) + "END-OF-PLAN\nsecond line"
	var longV store.Info
	okJSON(t, &longV, with(graph("third"), "session", "new", "--user", long)...)
	if code, out, errOut := rathctl(t, "", with(graph("third"), "session", "show", longV.ID.String())...); code != 0 ||
		!strings.Contains(out, "END-OF-PLAN\n      second line") {
		t.Errorf("show does not print the whole chunk (exit %d, %s):\n%s", code, errOut, out)
	}
	if code, out, errOut := rathctl(t, "", with(graph("third"), "session", "show", longV.ID.String(), "--short")...); code != 0 ||
		strings.Contains(out, "END-OF-PLAN") || !strings.Contains(out, "…") {
		t.Errorf("show --short does not cut the chunk (exit %d, %s):\n%s", code, errOut, out)
	}
}

func TestMigrateCommand(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "rath.db")
	code, out, _ := rathctl(t, "", "migrate", "--store", db)
	if code != 0 || strings.TrimSpace(out) != "migrated" {
		t.Fatalf("migrate: %d %q", code, out)
	}
}

// TestSessionCommandErrorsServer checks errors through the API: the
// coordinator's error reaches the user, with the exit code.
func TestSessionCommandErrorsServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, err := app.StartDev(context.Background(), app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", Workers: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{not json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown id", []string{"session", "show", "0199a3a4-7d5c-7000-8000-000000000000", "--server", d.URL}, 4, "version not found"},
		{"unknown id export", []string{"session", "export", "0199a3a4-7d5c-7000-8000-000000000000", "--server", d.URL}, 4, "404"},
		{"bad import", []string{"session", "import", bad, "--server", d.URL}, 1, "line 1: not Rath session JSONL"},
		{"bad import forced", []string{"session", "import", bad, "--format", "rath", "--server", d.URL}, 1, "400"},
		{"both", []string{"session", "list", "--server", d.URL, "--store", "sqlite:x.db"}, 2, "not both"},
		{"bad server", []string{"session", "list", "--server", "ftp://x"}, 2, "server URL"},
		{"down", []string{"session", "list", "--server", "http://127.0.0.1:1"}, 1, "connection refused"},
	}
	for _, c := range cases {
		code, _, errOut := rathctl(t, "", c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d mentioning %q", c.name, code, errOut, c.code, c.want)
		}
	}
}

func TestSessionCommandErrors(t *testing.T) {
	t.Parallel()
	db := migrated(t, filepath.Join(t.TempDir(), "rath.db"))
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"bad id", []string{"session", "show", "not-an-id"}, 2, "not a version id"},
		{"unknown id", []string{"session", "show", "0199a3a4-7d5c-7000-8000-000000000000"}, 4, "version not found"},
		{"new without text", []string{"session", "new"}, 2, "needs --user"},
		{"append without text", []string{"session", "append", "0199a3a4-7d5c-7000-8000-000000000000"}, 2, "needs --user"},
		{"bad output", []string{"session", "list", "--output", "yaml"}, 2, "--output"},
		{"bad store", []string{"session", "list", "--store", "mysql://x"}, 1, "unsupported URL scheme"},
		{"missing file", []string{"session", "import", "/nonexistent/file.jsonl"}, 1, "no such file"},
		{"merge arity", []string{"session", "merge", "a"}, 2, "accepts 2 arg"},
	}
	for _, c := range cases {
		args := slices.Concat(c.args, []string{"--store", db})
		if c.name == "bad store" {
			args = c.args
		}
		code, _, errOut := rathctl(t, "", args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d mentioning %q", c.name, code, errOut, c.code, c.want)
		}
	}
}

// with returns args followed by the graph-selecting flags.
func with(flags []string, args ...string) []string { return append(args, flags...) }
