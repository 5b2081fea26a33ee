package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/testenv"
)

// TestOpenRathImportThroughTheAPI: a tenant with only RATH_SERVER and a
// token imports OpenRath's own files with rathctl into a secured
// deployment on Postgres, whose default sandbox policy refuses the "local"
// sandbox fixture a was recorded with; each transcript exports back byte
// for byte, and another tenant gets 404 for all of them.
func TestOpenRathImportThroughTheAPI(t *testing.T) {
	fx := testenv.OpenRathFixtures(t)
	s := newSecured(t)
	acme := s.mint("submit", "acme")
	umbrella := s.mint("submit", "umbrella")

	var infos []struct {
		ID  string `json:"id"`
		Op  string `json:"op"`
		Len int    `json:"len"`
		Key string `json:"key"`
	}
	if err := json.Unmarshal([]byte(s.as(acme, "session", "import", filepath.Join(fx, "sessions"), "-o", "json")), &infos); err != nil {
		t.Fatal(err)
	}
	var exp struct {
		Cases map[string]struct {
			File      string `json:"file"`
			SessionID string `json:"session_id"`
		} `json:"cases"`
	}
	b, err := os.ReadFile(filepath.Join(fx, "persisted.expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &exp); err != nil {
		t.Fatal(err)
	}
	if len(infos) != len(exp.Cases) {
		t.Fatalf("imported %d transcripts, want %d: %+v", len(infos), len(exp.Cases), infos)
	}
	for name, c := range exp.Cases {
		got := s.as(acme, "session", "export", c.SessionID, "--format", "openrath")
		want, err := os.ReadFile(filepath.Join(fx, c.File))
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.LastIndexByte(want, '\n'); i >= 0 {
			want = want[:i+1] // a torn last line is dropped
		}
		if got != string(want) {
			t.Fatalf("%s: export --format openrath:\n%s\nwant\n%s", name, got, want)
		}
		for _, args := range [][]string{
			{"session", "show", c.SessionID},
			{"session", "export", c.SessionID, "--format", "openrath"},
		} {
			out, errOut, code := s.rathctl([]string{"RATH_TOKEN=" + umbrella}, "", args...)
			if code == 0 || !strings.Contains(errOut, "not found") || strings.Contains(out, c.SessionID) {
				t.Fatalf("another tenant's %v: exit %d %q %q", args, code, out, errOut)
			}
		}
	}

	// Lineage files, the loop transcript and the torn one, on stdin too.
	for _, f := range []string{"lineage_rich.jsonl", "lineage_demo.jsonl", "sessions_loop", "sessions_torn_utf8"} {
		s.as(acme, "session", "import", filepath.Join(fx, f))
	}
	lin, err := os.ReadFile(filepath.Join(fx, "lineage_rich.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	// Version ids are OpenRath's session ids and are unique across tenants,
	// so another tenant importing the same file is refused whole (409) and
	// gets none of acme's versions: it still sees nothing.
	out, errOut, code := s.rathctl([]string{"RATH_TOKEN=" + umbrella}, string(lin), "session", "import", "-")
	if code == 0 || !strings.Contains(errOut, "409") {
		t.Fatalf("the other tenant's import of the same lineage file: exit %d %q %s", code, out, errOut)
	}
	if out, errOut, code := s.rathctl([]string{"RATH_TOKEN=" + umbrella}, "", "session", "list", "-o", "json"); code != 0 || strings.Contains(out, `"id"`) {
		t.Fatalf("the other tenant lists %q (exit %d %s)", out, code, errOut)
	}
}
