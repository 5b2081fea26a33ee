package cli

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/app/apptest"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/session"
)

// scriptedRun runs a scripted agent on a dev stack and returns the stack's
// store flag, server flag and the finished run.
func scriptedRun(t *testing.T) (storeFlag, serverFlag []string, run runs.Run) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "rath.db")
	d := apptest.Dev(t, dir)
	var err error
	spec := json.RawMessage(`{"name":"echo","model":"scripted","script":[{"content":"hello from the scripted model"}]}`)
	run, err = d.Coordinator.Submit(ctx, api.SubmitRequest{Agent: spec, Message: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "run to end", func() bool {
		run, err = d.Backend.Runs.Get(ctx, run.ID)
		return err == nil && run.Status.Terminal()
	})
	if run.Status != runs.RunSucceeded {
		t.Fatalf("run ended %s: %s", run.Status, run.Error)
	}
	return []string{"--store", "sqlite:" + db}, []string{"--server", d.URL}, run
}

func TestGraphBlameDiffCommands(t *testing.T) {
	t.Parallel()
	storeFlag, serverFlag, run := scriptedRun(t)
	out, in := run.Output.String(), run.Input.String()
	for name, flags := range map[string][]string{"store": storeFlag, "server": serverFlag} {
		t.Run(name, func(t *testing.T) {
			var g lineage.Graph
			code, body, errOut := rathctl(t, "", with(flags, "graph", "--run", run.ID, "--format", "json")...)
			if code != 0 {
				t.Fatalf("graph --run: exit %d: %s", code, errOut)
			}
			if err := json.Unmarshal([]byte(body), &g); err != nil {
				t.Fatal(err)
			}
			if len(g.Nodes) != 2 || g.Output == nil || g.Output.String() != out {
				t.Errorf("graph of the run = %+v", g)
			}
			// -o json is the same JSON (lineage.Graph) as --format json.
			var gj lineage.Graph
			okJSON(t, &gj, with(flags, "graph", "--run", run.ID)...)
			if len(gj.Nodes) != 2 || gj.Output == nil || gj.Output.String() != out {
				t.Errorf("graph -o json = %+v", gj)
			}
			if code, _, errOut := rathctl(t, "", with(flags, "graph", in, "-o", "json", "--format", "svg")...); code != 2 || !strings.Contains(errOut, "--format") {
				t.Errorf("graph -o json --format svg: exit %d (%s), want 2 naming --format", code, errOut)
			}
			svg := filepath.Join(t.TempDir(), "g.svg")
			if code, _, errOut := rathctl(t, "", with(flags, "graph", in, "--out", svg)...); code != 0 {
				t.Fatalf("graph ID --out: exit %d: %s", code, errOut)
			}
			raw, err := os.ReadFile(svg)
			if err != nil {
				t.Fatal(err)
			}
			if err := xml.Unmarshal(raw, new(struct{})); err != nil || strings.Count(string(raw), `class="node"`) != 2 {
				t.Errorf("svg: %v\n%s", err, raw)
			}
			code, body, errOut = rathctl(t, "", with(flags, "graph", out, "--depth", "1", "--format", "dot")...)
			if code != 0 || !strings.HasPrefix(body, "digraph rath {") || !strings.Contains(body, in) {
				t.Errorf("graph --depth 1 --format dot: exit %d %s\n%s", code, errOut, body)
			}
			var blame struct {
				Chunks []lineage.Entry `json:"chunks"`
			}
			okJSON(t, &blame, with(flags, "blame", out)...)
			if len(blame.Chunks) != 2 || blame.Chunks[1].Agent != "echo" || blame.Chunks[1].Run != run.ID || blame.Chunks[0].Version.String() != in {
				t.Errorf("blame = %+v", blame.Chunks)
			}
			code, body, _ = rathctl(t, "", with(flags, "blame", out)...)
			if code != 0 || !strings.Contains(body, "echo") || !strings.Contains(body, "hello from the scripted model") {
				t.Errorf("blame text: exit %d\n%s", code, body)
			}
			for _, bad := range [][]string{
				{"graph"}, {"graph", in, "--run", run.ID}, {"graph", in, "--format", "png"}, {"blame", "nope"},
			} {
				if code, _, errOut := rathctl(t, "", with(flags, bad...)...); code != 2 {
					t.Errorf("rathctl %v: exit %d (%s), want 2", bad, code, errOut)
				}
			}
			// diff reads both versions from the store or, through the
			// coordinator, with the client's typed Graph.
			var d lineage.Delta
			okJSON(t, &d, with(flags, "diff", in, out)...)
			if d.CommonPrefix != 1 || len(d.OnlyA) != 0 || len(d.OnlyB) != 1 || d.OnlyB[0].Text != "hello from the scripted model" {
				t.Errorf("diff = %+v", d)
			}
			if code, _, errOut := rathctl(t, "", with(flags, "diff", in, session.NewID().String())...); code == 0 || !strings.Contains(errOut, "not found") {
				t.Errorf("diff with an unknown version: exit %d (%s), want a not-found error", code, errOut)
			}
		})
	}
}

func TestVerifyCommand(t *testing.T) {
	t.Parallel()
	storeFlag, _, run := scriptedRun(t)
	var rep api.VerifyReport
	okJSON(t, &rep, with(storeFlag, "verify", run.Output.String())...)
	if !rep.OK || rep.Versions != 2 || rep.Chunks != 2 {
		t.Errorf("verify ID = %+v", rep)
	}
	okJSON(t, &rep, with(storeFlag, "verify", "--all")...)
	if !rep.OK || rep.Versions != 2 || rep.Edges != 1 {
		t.Errorf("verify --all = %+v", rep)
	}
	code, out, _ := rathctl(t, "", with(storeFlag, "verify", "--all")...)
	if code != 0 || !strings.Contains(out, "verified 2 versions, 2 chunks: ok") {
		t.Errorf("verify --all text: exit %d\n%s", code, out)
	}
	for _, bad := range [][]string{{"verify"}, {"verify", "--all", run.Output.String()}, {"verify", "nope"}} {
		if code, _, errOut := rathctl(t, "", with(storeFlag, bad...)...); code != 2 {
			t.Errorf("rathctl %v: exit %d (%s), want 2", bad, code, errOut)
		}
	}
}

func TestDossierCommand(t *testing.T) {
	t.Parallel()
	storeFlag, _, run := scriptedRun(t)
	path := filepath.Join(t.TempDir(), "d.html")
	code, _, errOut := rathctl(t, "", with(storeFlag, "dossier", run.ID, "--format", "html", "--out", path, "--price", "scripted=1/2")...)
	if code != 0 {
		t.Fatalf("dossier: exit %d: %s", code, errOut)
	}
	page, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`<section id="graph">`, `<svg`, "hello from the scripted model", run.Output.String(), "The hash chain verifies"} {
		if !strings.Contains(string(page), w) {
			t.Errorf("dossier page lacks %q", w)
		}
	}
	code, md, _ := rathctl(t, "", with(storeFlag, "dossier", run.ID)...)
	if code != 0 || !strings.Contains(md, "# Evidence dossier: run "+run.ID) || !strings.Contains(md, "echo") {
		t.Errorf("dossier md: exit %d\n%s", code, md)
	}
	var dj lineage.Dossier
	okJSON(t, &dj, with(storeFlag, "dossier", run.ID)...)
	if dj.Run.ID != run.ID || dj.Output == nil || dj.Graph == nil || len(dj.Graph.Nodes) != 2 || dj.Verified == nil {
		t.Errorf("dossier -o json = %+v", dj)
	}
	for _, bad := range [][]string{{"dossier", run.ID, "--format", "pdf"}, {"dossier", run.ID, "--price", "x=1"}, {"dossier", run.ID, "-o", "json", "--format", "html"}} {
		if code, _, errOut := rathctl(t, "", with(storeFlag, bad...)...); code != 2 {
			t.Errorf("rathctl %v: exit %d (%s), want 2", bad, code, errOut)
		}
	}
	if code, _, _ := rathctl(t, "", with(storeFlag, "dossier", "no-such-run")...); code != 4 {
		t.Errorf("dossier of an unknown run: exit %d, want 4 (not found)", code)
	}
}

func TestGCAndPinCommands(t *testing.T) {
	t.Parallel()
	storeFlag, _, run := scriptedRun(t)
	out := run.Output.String()
	code, _, errOut := rathctl(t, "", with(storeFlag, "session", "new", "--user", "scratch")...)
	if code != 0 {
		t.Fatalf("session new: %d %s", code, errOut)
	}
	if code, body, errOut := rathctl(t, "", with(storeFlag, "pin", out, "--note", "release answer")...); code != 0 || !strings.Contains(body, "pinned "+out) {
		t.Fatalf("pin: exit %d %s %s", code, body, errOut)
	}
	var pins struct {
		Pins []lineage.Pin `json:"pins"`
	}
	okJSON(t, &pins, with(storeFlag, "pins")...)
	if len(pins.Pins) != 1 || pins.Pins[0].ID.String() != out || pins.Pins[0].Note != "release answer" {
		t.Errorf("pins = %+v", pins)
	}
	var rep lineage.GCReport
	okJSON(t, &rep, with(storeFlag, "gc", "--keep", "1h")...)
	if rep.Versions != 0 {
		t.Errorf("gc --keep 1h freed %+v", rep)
	}
	// A negligible horizon: the scratch session goes, the run's versions stay.
	okJSON(t, &rep, with(storeFlag, "gc", "--keep", "1ns", "--dry-run")...)
	if rep.Versions != 1 || rep.Chunks != 1 || !rep.DryRun {
		t.Errorf("gc --dry-run = %+v, want the scratch session", rep)
	}
	code, body, _ := rathctl(t, "", with(storeFlag, "gc", "--keep", "1ns")...)
	if code != 0 || !strings.Contains(body, "freed 1 versions, 1 chunks, 0 edges") {
		t.Errorf("gc: exit %d\n%s", code, body)
	}
	var vr api.VerifyReport
	okJSON(t, &vr, with(storeFlag, "verify", "--all")...)
	if !vr.OK || vr.Versions != 2 {
		t.Errorf("verify --all after gc = %+v", vr)
	}
	if code, _, _ := rathctl(t, "", with(storeFlag, "unpin", out)...); code != 0 {
		t.Errorf("unpin: exit %d", code)
	}
	if code, _, errOut := rathctl(t, "", with(storeFlag, "unpin", out)...); code != 1 || !strings.Contains(errOut, "not pinned") {
		t.Errorf("second unpin: exit %d %s", code, errOut)
	}
	for _, bad := range [][]string{{"gc"}, {"gc", "--keep", "-1h"}, {"pin", "nope"}} {
		if code, _, errOut := rathctl(t, "", with(storeFlag, bad...)...); code != 2 {
			t.Errorf("rathctl %v: exit %d (%s), want 2", bad, code, errOut)
		}
	}
}
