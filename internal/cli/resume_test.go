package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/client"
)

// TestRunsResumeAcceptChanges: `runs resume` needs --accept-changes (exit
// 2), records the acceptance on the run (runs show), prints the API's
// reply with -o json, and exits 4 for no run.
func TestRunsResumeAcceptChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := app.StartDev(ctx, app.DevConfig{Dir: t.TempDir(), Addr: "127.0.0.1:0", Workers: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	cl, err := client.New(d.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	run, err := cl.StartWorkflow(ctx, client.WorkflowRequest{Message: "go"})
	if err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := rathctl(t, "", "runs", "resume", run.ID, "--server", d.URL); code != 2 || !strings.Contains(errOut, "--accept-changes") {
		t.Fatalf("resume without --accept-changes: exit %d, %q; want 2 naming the flag", code, errOut)
	}
	var reply api.AcceptChangesReply
	okJSON(t, &reply, "runs", "resume", run.ID, "--accept-changes", "--server", d.URL)
	if reply.Run.ID != run.ID || reply.Run.ChangesAcceptedAt == nil || reply.Reopened {
		t.Fatalf("reply = %+v", reply)
	}
	code, out, errOut := rathctl(t, "", "runs", "show", run.ID, "--server", d.URL)
	if code != 0 || !strings.Contains(out, "changes accepted") {
		t.Fatalf("runs show: exit %d, %q, %q; want the acceptance shown", code, out, errOut)
	}
	if code, _, errOut := rathctl(t, "", "runs", "resume", "r-nope", "--accept-changes", "--server", d.URL); code != 4 {
		t.Fatalf("resume of no run: exit %d, %q; want 4", code, errOut)
	}
}
