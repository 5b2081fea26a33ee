package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

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

func TestSessionCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "rath.db")
	var root, a, b, fork, merged, detached store.Info
	okJSON(t, &root, "session", "new", "--system", "be brief", "--user", "plan a trip", "--store", db)
	if root.Op != "create" || root.Len != 2 || len(root.Parents) != 0 {
		t.Fatalf("new = %+v", root)
	}
	okJSON(t, &a, "session", "append", root.ID.String(), "--assistant", "Kyoto", "--store", db)
	okJSON(t, &fork, "session", "fork", root.ID.String(), "--store", db)
	if fork.Op != "fork" || fork.Len != 2 || fork.OwnChunks != 0 || fork.Parents[0] != root.ID {
		t.Fatalf("fork = %+v", fork)
	}
	okJSON(t, &b, "session", "append", fork.ID.String(), "--assistant", "Osaka", "--store", db)
	okJSON(t, &merged, "session", "merge", a.ID.String(), b.ID.String(), "--store", db)
	if merged.Op != "merge" || merged.Len != 4 || len(merged.Parents) != 2 {
		t.Fatalf("merge = %+v", merged)
	}
	okJSON(t, &detached, "session", "detach", merged.ID.String(), "--store", db)
	if detached.Op != "detach" || len(detached.Parents) != 0 || detached.Len != 4 {
		t.Fatalf("detach = %+v", detached)
	}

	code, out, errOut := rathctl(t, "", "session", "show", merged.ID.String(), "--store", db)
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
	okJSON(t, &shown, "session", "show", merged.ID.String(), "--store", db)
	if shown.Version.ID != merged.ID || len(shown.Transcript) != 4 {
		t.Fatalf("show json = %+v", shown)
	}

	var anc []store.Relative
	okJSON(t, &anc, "session", "log", merged.ID.String(), "--store", db)
	if len(anc) != 4 || anc[0].Depth != 1 || anc[len(anc)-1].ID != root.ID {
		t.Fatalf("log = %+v", anc)
	}

	var page store.Page
	okJSON(t, &page, "session", "list", "--roots", "--store", db)
	if len(page.Versions) != 2 || page.Versions[0].ID != root.ID || page.Versions[1].ID != detached.ID {
		t.Fatalf("list --roots = %+v", page)
	}
	code, out, _ = rathctl(t, "", "session", "list", "--limit", "2", "--store", db)
	if code != 0 || strings.Count(out, "\n") != 3 || !strings.Contains(out, "next page: --after ") {
		t.Fatalf("list --limit 2: %d %q", code, out)
	}

	// Export from this store, import into another, same transcript.
	code, exported, errOut := rathctl(t, "", "session", "export", merged.ID.String(), "--store", db)
	if code != 0 {
		t.Fatalf("export: %d %s", code, errOut)
	}
	file := filepath.Join(dir, "merged.jsonl")
	if err := os.WriteFile(file, []byte(exported), 0o600); err != nil {
		t.Fatal(err)
	}
	other := "sqlite:" + filepath.Join(dir, "other.db")
	var imported store.Info
	okJSON(t, &imported, "session", "import", file, "--store", other)
	if imported.Len != 4 || imported.Hash == "" {
		t.Fatalf("import = %+v", imported)
	}
	okJSON(t, &shown, "session", "show", imported.ID.String(), "--store", other)
	if len(shown.Transcript) != 4 {
		t.Fatalf("imported transcript has %d chunks", len(shown.Transcript))
	}
	code, out, _ = rathctl(t, exported, "session", "import", "-", "--store", "sqlite:"+filepath.Join(dir, "third.db"))
	if code != 0 || !strings.Contains(out, "len=4") {
		t.Fatalf("import from stdin: %d %q", code, out)
	}

	code, out, _ = rathctl(t, "", "migrate", "--store", db)
	if code != 0 || strings.TrimSpace(out) != "migrated" {
		t.Fatalf("migrate: %d %q", code, out)
	}
}

func TestSessionCommandErrors(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "rath.db")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"bad id", []string{"session", "show", "not-an-id"}, 2, "not a version id"},
		{"unknown id", []string{"session", "show", "0199a3a4-7d5c-7000-8000-000000000000"}, 1, "version not found"},
		{"new without text", []string{"session", "new"}, 2, "needs --user"},
		{"append without text", []string{"session", "append", "0199a3a4-7d5c-7000-8000-000000000000"}, 2, "needs --user"},
		{"bad output", []string{"session", "list", "--output", "yaml"}, 2, "--output"},
		{"bad store", []string{"session", "list", "--store", "mysql://x"}, 1, "unsupported URL scheme"},
		{"missing file", []string{"session", "import", "/nonexistent/file.jsonl"}, 1, "no such file"},
		{"merge arity", []string{"session", "merge", "a"}, 1, "accepts 2 arg"},
	}
	for _, c := range cases {
		args := append(c.args, "--store", db)
		if c.name == "bad store" {
			args = c.args
		}
		code, _, errOut := rathctl(t, "", args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d mentioning %q", c.name, code, errOut, c.code, c.want)
		}
	}
}
