package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/api"
)

// TestRunsListNeedsReview: `rathctl runs list` shows a run whose step
// stopped on an ambiguous call (recorded in the store as a worker records
// it) as needs_review, --status needs_review lists it and --status waiting
// does not, and an unknown status is refused naming the flag's field.
func TestRunsListNeedsReview(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	d, err := app.StartDev(ctx, app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", Workers: -1, StoreURL: "sqlite:" + filepath.Join(dir, "rath.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	run, err := d.Coordinator.Submit(ctx, api.SubmitRequest{Agent: json.RawMessage(`{"name":"payer","model":"scripted","script":[{"content":"hi"}]}`), Message: "Pay."})
	if err != nil {
		t.Fatal(err)
	}
	other, err := d.Coordinator.Submit(ctx, api.SubmitRequest{Agent: json.RawMessage(`{"name":"idle","model":"scripted","script":[{"content":"hi"}]}`), Message: "Wait."})
	if err != nil {
		t.Fatal(err)
	}
	rs := d.Backend.Runs
	stepID := run.Steps[0].ID
	if _, err := rs.StartStep(ctx, stepID, "w1"); err != nil {
		t.Fatal(err)
	}
	amb, _ := json.Marshal(agent.AmbiguousError{Round: 1, CallID: "pay1", Tool: "pay", Arguments: `{"eur":5}`, Worker: "w1"})
	if _, err := rs.NeedsReview(ctx, stepID, 1, "pay1", "w1", amb); err != nil {
		t.Fatal(err)
	}
	server := []string{"--server", d.URL}
	list := func(args ...string) string {
		t.Helper()
		code, out, errOut := rathctl(t, "", with(server, append([]string{"runs", "list"}, args...)...)...)
		if code != 0 {
			t.Fatalf("runs list %v: exit %d %s", args, code, errOut)
		}
		return out
	}
	if out := list(); !strings.Contains(out, run.ID+"  needs_review") || !strings.Contains(out, other.ID+"  pending") {
		t.Errorf("runs list:\n%s\nwant %s needs_review and %s pending", out, run.ID, other.ID)
	}
	if out := list("--status", "needs_review"); !strings.Contains(out, run.ID+"  needs_review") || strings.Contains(out, other.ID) {
		t.Errorf("runs list --status needs_review:\n%s\nwant only %s", out, run.ID)
	}
	if out := list("--status", "waiting"); strings.Contains(out, run.ID) {
		t.Errorf("runs list --status waiting:\n%s\nwant no needs_review run", out)
	}
	var l api.RunList
	okJSON(t, &l, with(server, "runs", "list", "--status", "needs_review")...)
	if len(l.Runs) != 1 || l.Runs[0].ID != run.ID || l.Runs[0].Status != api.RunNeedsReview {
		t.Errorf("runs list --status needs_review -o json = %+v", l)
	}
	code, _, errOut := rathctl(t, "", with(server, "runs", "list", "--status", "reviewed")...)
	if code == 0 || !strings.Contains(errOut, `status: "reviewed" is not a run status`) || !strings.Contains(errOut, "400") {
		t.Errorf("runs list --status reviewed: exit %d %s; want a 400 naming status", code, errOut)
	}
}
