package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/api"
)

// TestLineageOpsThroughServer runs verify, dossier and replay against a
// coordinator (--server only: no store), with -o json printing the API's
// own types.
func TestLineageOpsThroughServer(t *testing.T) {
	t.Parallel()
	_, serverFlag, run := scriptedRun(t)
	out := run.Output.String()

	var rep api.VerifyReport
	okJSON(t, &rep, with(serverFlag, "verify", out)...)
	if !rep.OK || rep.ID != out || rep.Versions != 2 || rep.Chunks != 2 {
		t.Errorf("verify ID through the server = %+v", rep)
	}
	okJSON(t, &rep, with(serverFlag, "verify", "--all")...)
	if !rep.OK || rep.Versions < 2 {
		t.Errorf("verify --all through the server = %+v", rep)
	}
	if code, text, errOut := rathctl(t, "", with(serverFlag, "verify", out)...); code != 0 || !strings.Contains(text, "verified 2 versions, 2 chunks: ok") {
		t.Errorf("verify text: exit %d %q %s", code, text, errOut)
	}

	code, md, errOut := rathctl(t, "", with(serverFlag, "dossier", run.ID, "--price", "scripted=1/2")...)
	if code != 0 || !strings.Contains(md, run.ID) || !strings.Contains(md, "hello from the scripted model") {
		t.Errorf("dossier md through the server: exit %d %s\n%s", code, errOut, md)
	}
	path := filepath.Join(t.TempDir(), "d.html")
	if code, _, errOut := rathctl(t, "", with(serverFlag, "dossier", run.ID, "--format", "html", "--out", path)...); code != 0 {
		t.Fatalf("dossier html: exit %d %s", code, errOut)
	}
	if b, err := os.ReadFile(path); err != nil || !strings.Contains(string(b), "<html") || strings.Contains(string(b), "<script") {
		t.Errorf("dossier html through the server: %v %.200s", err, b)
	}
	var d api.Dossier
	okJSON(t, &d, with(serverFlag, "dossier", run.ID)...)
	if d.Output == nil || d.Output.Version != *run.Output || d.Status != "succeeded" {
		t.Errorf("dossier -o json through the server = %+v", d)
	}
	if code, _, errOut := rathctl(t, "", with(serverFlag, "dossier", "run-nope")...); code == 0 || !strings.Contains(errOut, "run-nope") {
		t.Errorf("dossier of a missing run: exit %d %s", code, errOut)
	}

	var rp api.ReplayReport
	okJSON(t, &rp, with(serverFlag, "replay", out, "--strict")...)
	if !rp.Identical || rp.Replay == nil || rp.Chunks != 1 || rp.Of != *run.Output {
		t.Fatalf("replay --strict through the server = %+v", rp)
	}
	if code, _, errOut := rathctl(t, "", with(serverFlag, "replay", run.Input.String())...); code != 1 || !strings.Contains(errOut, "not by an agent step") {
		t.Errorf("replay of the input through the server: exit %d %s", code, errOut)
	}
	// The replay is in the graph and verifies.
	okJSON(t, &rep, with(serverFlag, "verify", rp.Replay.String())...)
	if !rep.OK || rep.Versions != 2 {
		t.Errorf("verify of the replay = %+v", rep)
	}
}

// TestVerifyNothingFails: a verify that checked no version (an empty
// store) says so and exits 1, instead of "ok".
func TestVerifyNothingFails(t *testing.T) {
	t.Parallel()
	store := []string{"--store", migrated(t, filepath.Join(t.TempDir(), "empty.db"))}
	code, out, _ := rathctl(t, "", with(store, "verify", "--all")...)
	if code != 1 || strings.Contains(out, ": ok") || !strings.Contains(out, "verified 0 versions, 0 chunks: nothing was checked") {
		t.Errorf("verify --all of an empty store: exit %d %q", code, out)
	}
	code, out, _ = rathctl(t, "", with(store, "verify", "--all", "-o", "json")...)
	if code != 1 || !strings.Contains(out, `"ok": false`) {
		t.Errorf("verify --all -o json of an empty store: exit %d %q", code, out)
	}
}
