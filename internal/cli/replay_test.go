package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/client"
)

func TestReplayCommand(t *testing.T) {
	t.Parallel()
	storeFlag, _, run := scriptedRun(t)
	var rep api.ReplayReport
	okJSON(t, &rep, with(storeFlag, "replay", run.Output.String(), "--strict")...)
	if !rep.Identical || rep.Replay == nil || rep.Chunks != 1 {
		t.Fatalf("replay --strict = %+v", rep)
	}
	var g struct {
		Nodes []struct {
			Op string `json:"op"`
		} `json:"nodes"`
	}
	code, body, _ := rathctl(t, "", with(storeFlag, "graph", run.Input.String(), "--format", "json")...)
	if err := json.Unmarshal([]byte(body), &g); code != 0 || err != nil || len(g.Nodes) != 3 || g.Nodes[2].Op != "replay" {
		t.Errorf("graph after replay: exit %d %v %+v", code, err, g)
	}
	if code, _, errOut := rathctl(t, "", with(storeFlag, "replay", run.Input.String())...); code != 1 || !strings.Contains(errOut, "not by an agent step") {
		t.Errorf("replay of the input: exit %d %s", code, errOut)
	}
}

// TestReplayWorkflowStepVersion: replay VERSION of a version a workflow
// file's step made (its step's target is a call envelope, not a bare spec)
// replays that step, identically, through the coordinator and from the
// store; a selector step's version is refused, pointing at replay --run.
func TestReplayWorkflowStepVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	storeURL := "sqlite:" + filepath.Join(dir, "rath.db")
	d, err := app.StartDev(ctx, app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", Workers: 1, StoreURL: storeURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	flow := filepath.Join(dir, "flow.yaml")
	doc := "agents:\n  a:\n    model: scripted\n    script: [first, second]\n  r:\n    model: scripted\n    script: [\"0\", \"-1\"]\n" +
		"steps:\n  - agent: a\n  - select: {selector: r, candidates: [a], max_rounds: 3}\n"
	if err := os.WriteFile(flow, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	var r api.Run
	okJSON(t, &r, "run", flow, "-m", "go", "--server", d.URL)
	cl, err := client.New(d.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	if r, err = cl.WaitRun(ctx, r.ID); err != nil || r.Status != api.RunSucceeded || len(r.Steps) != 2 {
		t.Fatalf("run %s: %v %+v", r.ID, err, r)
	}
	step1 := r.Steps[0].Output.String()
	for _, where := range [][]string{{"--server", d.URL}, {"--store", storeURL}} {
		var rep api.ReplayReport
		okJSON(t, &rep, append([]string{"replay", step1, "--strict"}, where...)...)
		if !rep.Identical || rep.Replay == nil {
			t.Errorf("replay %s %v = %+v, want identical", step1, where, rep)
		}
	}
	sel := r.Steps[1].Output.String()
	if code, _, errOut := rathctl(t, "", "replay", sel, "--server", d.URL); code == 0 || !strings.Contains(errOut, "replay --run") {
		t.Errorf("replay of the selector step's version: exit %d %s", code, errOut)
	}
}
