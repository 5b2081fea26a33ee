package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// runWriting submits a scripted run on input that writes files (path →
// content) with write_workspace_file and returns its output version. pad is
// how many assistant messages the input already holds (the scripted model
// answers by that count).
func runWriting(t *testing.T, cl *client.Client, input string, pad int, files map[string]string) session.ID {
	t.Helper()
	ctx := context.Background()
	script := make([]map[string]any, 0, pad+2)
	for range pad {
		script = append(script, map[string]any{"content": "(earlier)"})
	}
	var calls []map[string]any
	for p, c := range files {
		calls = append(calls, map[string]any{"function": map[string]any{
			"name": "write_workspace_file", "arguments": map[string]string{"path": p, "content": c},
		}})
	}
	script = append(script, map[string]any{"tool_calls": calls}, map[string]any{"content": "written"})
	spec, err := json.Marshal(map[string]any{"name": "writer", "model": "scripted", "tools": []string{"write_workspace_file"}, "script": script})
	if err != nil {
		t.Fatal(err)
	}
	var r runs.Run
	if err := cl.Do(ctx, "POST", "/v1/runs", map[string]any{"agent": json.RawMessage(spec), "session": input}, &r); err != nil {
		t.Fatalf("submit: %v", err)
	}
	testenv.Eventually(t, 30*time.Second, "run "+r.ID+" to end", func() bool {
		if r.Status.Terminal() {
			return true
		}
		if err := cl.Do(ctx, "GET", "/v1/runs/"+r.ID, nil, &r); err != nil {
			t.Fatal(err)
		}
		return r.Status.Terminal()
	})
	if r.Status != runs.RunSucceeded || r.Output == nil {
		t.Fatalf("run %s: %s (%s)", r.ID, r.Status, r.Error)
	}
	return *r.Output
}

// TestSessionFilesAndDiff runs `rathctl session files` and `session diff`
// against a `rathctl dev` stack whose worker snapshots workspaces into the
// embedded JetStream object store.
func TestSessionFilesAndDiff(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, err := app.StartDev(context.Background(), app.DevConfig{
		Dir: dir, Addr: "127.0.0.1:0", StoreURL: "sqlite:" + filepath.Join(dir, "rath.db"), Workers: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	cl, err := client.New(d.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var root store.Info
	if err := cl.Do(ctx, "POST", "/v1/sessions", map[string]string{"user": "take notes"}, &root); err != nil {
		t.Fatal(err)
	}
	a := runWriting(t, cl, root.ID.String(), 0, map[string]string{"notes/todo.txt": "v1", "keep.txt": "same"})
	var fork store.Info
	if err := cl.Do(ctx, "POST", "/v1/sessions/"+a.String()+"/fork", nil, &fork); err != nil {
		t.Fatal(err)
	}
	b := runWriting(t, cl, fork.ID.String(), 2, map[string]string{"notes/todo.txt": "v2", "b.txt": "new"})

	srv := "--server=" + d.URL
	code, out, errOut := rathctl(t, "", "session", "files", a.String(), srv)
	if code != 0 {
		t.Fatalf("files: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"snapshot ", "2 files, 6 bytes", "drwxr-xr-x          -  notes/", "-rw-r--r--          2  notes/todo.txt", "keep.txt"} {
		if !strings.Contains(out, want) {
			t.Errorf("files output lacks %q:\n%s", want, out)
		}
	}
	var fv api.FilesView
	okJSON(t, &fv, "session", "files", b.String(), srv)
	if fv.ID != b || fv.Files != 3 || len(fv.Entries) != 4 || fv.Snapshot == "" {
		t.Errorf("files -o json = %+v", fv)
	}

	code, out, errOut = rathctl(t, "", "session", "diff", a.String(), b.String(), srv)
	if code != 0 {
		t.Fatalf("diff: exit %d: %s", code, errOut)
	}
	if want := "A  b.txt\nM  notes/todo.txt\n"; out != want {
		t.Errorf("diff A B = %q, want %q", out, want)
	}
	// A fork shares its parent's snapshot: no changes.
	code, out, _ = rathctl(t, "", "session", "diff", a.String(), fork.ID.String(), srv)
	if code != 0 || out != "" {
		t.Errorf("diff A fork: exit %d, %q; want no changes", code, out)
	}
	var dv api.DiffView
	okJSON(t, &dv, "session", "diff", root.ID.String(), a.String(), srv)
	if dv.FromSnapshot != "" || len(dv.Changes) != 3 || dv.Changes[0].Kind != "added" {
		t.Errorf("diff root A -o json = %+v", dv)
	}

	// session cat prints one file's bytes, as stored at each version.
	for _, tc := range []struct {
		id   session.ID
		path string
		want string
	}{{a, "notes/todo.txt", "v1"}, {b, "notes/todo.txt", "v2"}, {b, "b.txt", "new"}} {
		if code, out, errOut := rathctl(t, "", "session", "cat", tc.id.String(), tc.path, srv); code != 0 || out != tc.want {
			t.Errorf("cat %s %s: exit %d %q (%s), want %q", tc.id, tc.path, code, out, errOut, tc.want)
		}
	}
	for _, bad := range []struct {
		args []string
		code int
	}{
		{[]string{"session", "cat", a.String(), "b.txt", srv}, 4},         // not in a's workspace
		{[]string{"session", "cat", a.String(), "notes", srv}, 4},         // a directory (the API's 404)
		{[]string{"session", "cat", a.String(), "../etc/passwd", srv}, 2}, // not a workspace path
		{[]string{"session", "cat", "nope", "b.txt", srv}, 2},
	} {
		if code, out, errOut := rathctl(t, "", bad.args...); code != bad.code {
			t.Errorf("rathctl %v: exit %d %q (%s), want %d", bad.args, code, out, errOut, bad.code)
		}
	}

	code, out, _ = rathctl(t, "", "session", "files", root.ID.String(), srv)
	if code != 0 || !strings.Contains(out, "empty workspace") {
		t.Errorf("files of a version without a workspace: exit %d, %q", code, out)
	}
	missing := session.NewID()
	code, _, errOut = rathctl(t, "", "session", "files", missing.String(), srv)
	if code != 4 || !strings.Contains(errOut, "not_found") {
		t.Errorf("files of a missing version: exit %d, %q", code, errOut)
	}
	code, _, errOut = rathctl(t, "", "session", "diff", a.String(), "nope", srv)
	if code != 2 {
		t.Errorf("diff with a malformed id: exit %d, %q; want 2", code, errOut)
	}
}

func TestSessionFilesNeedsACoordinator(t *testing.T) {
	t.Parallel()
	code, _, errOut := rathctl(t, "", "session", "files", session.NewID().String(), "--store", "sqlite:"+filepath.Join(t.TempDir(), "x.db"))
	if code != 2 || !strings.Contains(errOut, "--server") {
		t.Errorf("files with --store: exit %d, %q; want 2 asking for --server", code, errOut)
	}
	code, _, errOut = rathctl(t, "", "session", "cat", session.NewID().String(), "a.txt", "--store", "sqlite:"+filepath.Join(t.TempDir(), "x.db"))
	if code != 2 || !strings.Contains(errOut, "--server") {
		t.Errorf("cat with --store: exit %d, %q; want 2 asking for --server", code, errOut)
	}
}
