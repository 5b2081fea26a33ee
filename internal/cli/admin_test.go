package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// notFoundExit is the exit code of a command whose object does not exist
// (docs/cli.md: not found). The commands return errors wrapping
// session.ErrNotFound; the exit code mapping names the code.
const notFoundExit = 4

// TestAdminCommandsThroughCoordinator runs gc, pin, unpin, pins, redact,
// redactions, check and memory against a coordinator (--server), with no
// store flag: each goes through pkg/client, and -o json prints pkg/api's
// types.
func TestAdminCommandsThroughCoordinator(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, err := app.StartDev(context.Background(), app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", Workers: -1, StoreURL: "sqlite:" + filepath.Join(dir, "rath.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	srv := []string{"--server", d.URL}
	cmd := func(args ...string) []string { return append(args, srv...) }
	run := func(want int, args ...string) (string, string) {
		t.Helper()
		code, out, errOut := rathctl(t, "", cmd(args...)...)
		if code != want {
			t.Fatalf("rathctl %v: exit %d, want %d: %s %s", args, code, want, out, errOut)
		}
		return out, errOut
	}

	// An empty coordinator checks nothing and says so: never a bare "ok".
	out, _ := run(0, "check")
	if !strings.Contains(out, "checked 0 versions") || strings.HasSuffix(out, "ok\n") || !strings.Contains(out, "nothing checked") {
		t.Fatalf("check of nothing: %q", out)
	}

	var root, v store.Info
	okJSON(t, &root, cmd("session", "new", "--system", "Be brief.", "--user", "My card is 4111 1111 1111 1111.")...)
	okJSON(t, &v, cmd("session", "append", root.ID.String(), "--assistant", "Noted.")...)

	var pinned api.PinReply
	okJSON(t, &pinned, cmd("pin", v.ID.String(), "--note", "audit")...)
	if pinned.ID != v.ID || !pinned.Pinned || pinned.Note != "audit" {
		t.Fatalf("pin: %+v", pinned)
	}
	var pins api.PinList
	okJSON(t, &pins, cmd("pins")...)
	if len(pins.Pins) != 1 || pins.Pins[0].ID != v.ID || pins.Pins[0].Note != "audit" {
		t.Fatalf("pins: %+v", pins)
	}
	if out, _ := run(0, "pins"); !strings.Contains(out, v.ID.String()+"  audit") {
		t.Fatalf("pins text: %q", out)
	}
	_, errOut := run(notFoundExit, "pin", session.NewID().String())
	if !strings.Contains(errOut, "not found") && !strings.Contains(errOut, "no such") {
		t.Fatalf("pin of no version: %s", errOut)
	}

	// Nothing is old enough for gc to free with a long horizon.
	var gc api.GCReport
	okJSON(t, &gc, cmd("gc", "--keep", "720h", "--dry-run")...)
	if !gc.DryRun || gc.Versions != 0 {
		t.Fatalf("gc dry run: %+v", gc)
	}
	run(2, "gc")

	// Redact the card number; the coordinator serves the marker at once.
	var red api.RedactReply
	okJSON(t, &red, cmd("redact", root.ID.String(), "--chunk", "1", "--reason", "PAN")...)
	if len(red.Redactions) != 1 || red.Redactions[0].Version != root.ID || red.Redactions[0].Ord != 1 {
		t.Fatalf("redact: %+v", red)
	}
	if out, _ := run(0, "session", "show", v.ID.String()); strings.Contains(out, "4111") {
		t.Fatalf("session show after redact still shows the card number:\n%s", out)
	}
	_, errOut = run(1, "redact", root.ID.String(), "--chunk", "1", "--reason", "again")
	if !strings.Contains(errOut, "already redacted") {
		t.Fatalf("second redact: %s", errOut)
	}
	_, errOut = run(1, "redact", root.ID.String(), "--chunk", "9", "--reason", "x")
	if !strings.Contains(errOut, "chunk") {
		t.Fatalf("redact past the transcript: %s", errOut)
	}
	run(2, "redact", root.ID.String(), "--chunk", "0")
	var rl api.RedactionList
	okJSON(t, &rl, cmd("redactions")...)
	if len(rl.Redactions) != 1 || rl.Redactions[0].Reason != "PAN" || rl.Problems == nil || len(rl.Problems) != 0 {
		t.Fatalf("redactions: %+v", rl)
	}

	var rep api.CheckReport
	okJSON(t, &rep, cmd("check")...)
	if rep.Versions != 2 || rep.Chunks == 0 || !rep.OK() {
		t.Fatalf("check: %+v", rep)
	}
	if out, _ := run(0, "check"); !strings.Contains(out, "checked 2 versions") || !strings.HasSuffix(out, "ok\n") {
		t.Fatalf("check text: %q", out)
	}

	var unpinned api.PinReply
	okJSON(t, &unpinned, cmd("unpin", v.ID.String())...)
	if unpinned.Pinned {
		t.Fatalf("unpin: %+v", unpinned)
	}
	run(notFoundExit, "unpin", v.ID.String())

	// Memory: remember, list, delete (a tombstone stays), commit.
	mem := func(args ...string) []string { return cmd(append([]string{"memory"}, args...)...) }
	var it api.MemoryItem
	okJSON(t, &it, mem("remember", "memory://user/memories/colour", "teal", "--version", v.ID.String())...)
	if it.VersionID != v.ID.String() || it.Text != "teal" {
		t.Fatalf("remember: %+v", it)
	}
	if code, _, errOut := rathctl(t, "", mem("remember", "memory://user/x", "t", "--version", session.NewID().String())...); code == 0 || !strings.Contains(errOut, "no such version") {
		t.Fatalf("remember naming no version: exit %d %s", code, errOut)
	}
	var del api.MemoryDeleteReply
	okJSON(t, &del, mem("delete", "memory://user/memories/colour")...)
	if del.Deleted != "memory://user/memories/colour" {
		t.Fatalf("delete: %+v", del)
	}
	var list api.MemoryList
	okJSON(t, &list, mem("list", "--deleted")...)
	if len(list.Items) != 1 || list.Items[0].DeletedAt.IsZero() {
		t.Fatalf("list --deleted: %+v", list)
	}
	var committed api.MemoryCommitReply
	okJSON(t, &committed, mem("commit", v.ID.String(), "--agent", "helper")...)
	if committed.Transcript.URI != agent.TranscriptURI(v.ID) || committed.Transcript.VersionID != v.ID.String() ||
		strings.Contains(committed.Transcript.Text, "4111") || !strings.Contains(committed.Transcript.Text, "assistant: Noted.") {
		t.Fatalf("commit: %+v", committed)
	}
	var hits api.RecallReply
	okJSON(t, &hits, mem("recall", "Noted")...)
	if len(hits.Hits) != 1 || hits.Hits[0].URI != committed.Transcript.URI {
		t.Fatalf("recall: %+v", hits)
	}
	if code, _, errOut := rathctl(t, "", mem("show", "memory://user/nope")...); code != notFoundExit || !strings.Contains(errOut, "not_found") {
		t.Fatalf("show of nothing: exit %d %s", code, errOut)
	}
}
