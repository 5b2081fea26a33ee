package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/app/apptest"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/api"
)

// TestRunsShowABudgetStop: `rathctl runs show` of a run whose step crossed
// its token budget says so (the stop reason and the budget's message) and
// prints the usage; -o json stays the API's run.
func TestRunsShowABudgetStop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	d := apptest.Dev(t, dir)
	spec := json.RawMessage(`{"name":"spender","model":"scripted","limits":{"max_tokens":3},
		"script":[{"content":"a long answer that spends more tokens than the budget allows"}]}`)
	run, err := d.Coordinator.Submit(ctx, api.SubmitRequest{Agent: spec, Message: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "run to end", func() bool {
		run, err = d.Backend.Runs.Get(ctx, run.ID)
		return err == nil && run.Status.Terminal()
	})
	server := []string{"--server", d.URL}
	code, out, errOut := rathctl(t, "", with(server, "runs", "show", run.ID)...)
	if code != 0 {
		t.Fatalf("runs show: exit %d %s", code, errOut)
	}
	for _, want := range []string{"stopped step_tokens: the step's token budget is spent: used ", " of 3", "usage   prompt="} {
		if !strings.Contains(out, want) {
			t.Errorf("runs show does not say %q:\n%s", want, out)
		}
	}
	var r api.Run
	okJSON(t, &r, with(server, "runs", "show", run.ID)...)
	if r.ID != run.ID {
		t.Errorf("runs show -o json = %+v", r)
	}
}
