package cli

import (
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/lineage"
)

func TestRedactCommand(t *testing.T) {
	t.Parallel()
	storeFlag, _, run := scriptedRun(t)
	out := run.Output.String()
	for _, bad := range [][]string{
		{"redact", out, "--reason", "x"},
		{"redact", out, "--chunk", "0"},
		{"redact", "nope", "--chunk", "0", "--reason", "x"},
	} {
		if code, _, errOut := rathctl(t, "", with(storeFlag, bad...)...); code != 2 {
			t.Errorf("rathctl %v: exit %d (%s), want 2", bad, code, errOut)
		}
	}
	if code, _, errOut := rathctl(t, "", with(storeFlag, "redact", out, "--chunk", "999", "--reason", "x")...); code != 1 || !strings.Contains(errOut, "--chunk 999") {
		t.Errorf("redact past the end: exit %d %s", code, errOut)
	}
	code, body, errOut := rathctl(t, "", with(storeFlag, "redact", out, "--chunk", "0", "--reason", "user asked")...)
	if code != 0 || !strings.Contains(body, "redacted chunks row") {
		t.Fatalf("redact: exit %d\n%s\n%s", code, body, errOut)
	}
	var list struct {
		Redactions []lineage.Redaction `json:"redactions"`
		Problems   []lineage.Problem   `json:"problems"`
	}
	okJSON(t, &list, with(storeFlag, "redactions")...)
	if len(list.Redactions) == 0 || list.Redactions[0].Ord != 0 || list.Redactions[0].Reason != "user asked" || len(list.Problems) != 0 {
		t.Errorf("redactions = %+v", list)
	}
	var vr api.VerifyReport
	okJSON(t, &vr, with(storeFlag, "verify", "--all")...)
	if !vr.OK {
		t.Errorf("verify --all after redact = %+v", vr)
	}
	okJSON(t, &vr, with(storeFlag, "verify", out)...)
	if !vr.OK {
		t.Errorf("verify %s after redact = %+v", out, vr)
	}
	if code, _, errOut := rathctl(t, "", with(storeFlag, "redact", out, "--chunk", "0", "--reason", "again")...); code != 1 || !strings.Contains(errOut, "already redacted") {
		t.Errorf("second redact: exit %d %s", code, errOut)
	}
}
