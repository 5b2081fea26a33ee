package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/api"
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
