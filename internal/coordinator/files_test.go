package coordinator_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/coordinator"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/workspace"
)

// get calls the handler and decodes the JSON reply.
func get(t *testing.T, h http.Handler, path string, v any) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if v != nil && rec.Code == http.StatusOK {
		if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, rec.Body)
		}
	}
	return rec.Code, rec.Body.String()
}

// noWorkspacesBus hides the bus's object store.
type noWorkspacesBus struct{ coordinator.Bus }

func TestFilesAndDiffEndpoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	d, err := app.StartDev(ctx, app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", Workers: -1, StoreURL: "sqlite:" + filepath.Join(dir, "rath.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	b := d.Backend
	h := d.Coordinator.Handler()

	// A version whose placement names a snapshot of two files.
	st := workspace.JetStream(b.Bus.JetStream(), b.Bus.Workspaces())
	snaps, err := workspace.New(st, workspace.Config{})
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	for p, c := range map[string]string{"a.txt": "A", "d/b.txt": "B"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, err := snaps.Snapshot(ctx, src, "")
	if err != nil {
		t.Fatal(err)
	}
	root, err := session.FromUserMessage(ctx, b.Store, "files")
	if err != nil {
		t.Fatal(err)
	}
	placed, err := root.To(ctx, session.Placement{Backend: "local", Snapshot: res.ID})
	if err != nil {
		t.Fatal(err)
	}

	var fv api.FilesView
	if code, body := get(t, h, "/v1/sessions/"+placed.ID().String()+"/files", &fv); code != http.StatusOK {
		t.Fatalf("files: %d %s", code, body)
	}
	if fv.Snapshot != res.ID || fv.Files != 2 || fv.Bytes != 2 || len(fv.Entries) != 3 {
		t.Errorf("files = %+v", fv)
	}
	var dv api.DiffView
	if code, body := get(t, h, "/v1/sessions/"+root.ID().String()+"/diff?to="+placed.ID().String(), &dv); code != http.StatusOK {
		t.Fatalf("diff: %d %s", code, body)
	}
	if len(dv.Changes) != 3 || dv.ToSnapshot != res.ID || dv.Changes[0].Kind != api.Added {
		t.Errorf("diff = %+v", dv)
	}

	// One file's bytes.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/sessions/"+placed.ID().String()+"/files/d/b.txt", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != "B" || rec.Header().Get("Content-Type") != "application/octet-stream" ||
		len(rec.Header().Get("Rath-File-Sha256")) != 64 {
		t.Errorf("file content: %d %q %v", rec.Code, rec.Body, rec.Header())
	}

	missing, err := root.To(ctx, session.Placement{Snapshot: strings.Repeat("ab", 32)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{"/v1/sessions/" + root.ID().String() + "/diff", http.StatusBadRequest, "to: required"},
		{"/v1/sessions/" + root.ID().String() + "/diff?to=nope", http.StatusBadRequest, "to:"},
		{"/v1/sessions/" + root.ID().String() + "/diff?to=" + session.NewID().String(), http.StatusNotFound, "not_found"},
		{"/v1/sessions/" + session.NewID().String() + "/files", http.StatusNotFound, "not_found"},
		{"/v1/sessions/" + missing.ID().String() + "/files", http.StatusNotFound, strings.Repeat("ab", 32)},
		{"/v1/sessions/" + placed.ID().String() + "/files/nope.txt", http.StatusNotFound, "nope.txt"},
		{"/v1/sessions/" + placed.ID().String() + "/files/d", http.StatusNotFound, "not a file"},
		{"/v1/sessions/" + placed.ID().String() + "/files/a%00b", http.StatusBadRequest, "path:"},
		{"/v1/sessions/" + root.ID().String() + "/files/a.txt", http.StatusNotFound, "a.txt"},
		{"/v1/sessions/" + session.NewID().String() + "/files/a.txt", http.StatusNotFound, "not_found"},
	} {
		if code, body := get(t, h, tc.path, nil); code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s = %d %s; want %d containing %q", tc.path, code, body, tc.code, tc.want)
		}
	}

	// A coordinator whose bus has no object store says so.
	bare, err := coordinator.New(b.Store, b.Runs, noWorkspacesBus{b.Bus}, coordinator.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, bare.Handler(), "/v1/sessions/"+placed.ID().String()+"/files", nil); code != http.StatusServiceUnavailable ||
		!strings.Contains(body, "no workspace store") {
		t.Errorf("files without a workspace store = %d %s", code, body)
	}
}
