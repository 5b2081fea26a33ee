package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/memory"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

func TestMemoryCommands(t *testing.T) {
	t.Parallel()
	store := migrated(t, filepath.Join(t.TempDir(), "rath.db"))
	run := func(stdin string, args ...string) string {
		t.Helper()
		code, out, errOut := rathctl(t, stdin, append([]string{"memory", "--store", store}, args...)...)
		if code != 0 {
			t.Fatalf("rathctl memory %v: exit %d: %s", args, code, errOut)
		}
		return out
	}
	run("", "remember", "memory://user/memories/preferences/dark_mode", "The user prefers a dark color theme at night.", "--version", "v-1", "--meta", "source=cli")
	run("The user reads English and writes Python.", "remember", "memory://user/memories/preferences/language")
	run("", "remember", "--namespace", "other", "memory://user/x", "night night night")

	var hitsReply api.RecallReply
	okJSON(t, &hitsReply, "memory", "--store", store, "recall", "reading code at night", "-k", "3")
	hits := hitsReply.Hits
	// OpenRath's example 09 numbers (fixtures/openrath/memory_bm25.expected.json).
	if len(hits) != 2 || hits[0].Score != 1.3124680341963462 || hits[0].VersionID != "v-1" || hits[1].Score != 0 {
		t.Fatalf("recall: %+v", hits)
	}
	if out := run("", "recall", "reading code at night"); !strings.Contains(out, "1.312  memory://user/memories/preferences/dark_mode  v-1") {
		t.Fatalf("recall text:\n%s", out)
	}
	var it memory.Item
	okJSON(t, &it, "memory", "--store", store, "show", "memory://user/memories/preferences/dark_mode")
	if it.VersionID != "v-1" || it.Metadata["source"] != "cli" {
		t.Fatalf("show: %+v", it)
	}
	run("", "delete", "memory://user/memories/preferences/language", "--version", "v-2")
	if out := run("", "list"); strings.Contains(out, "language") || !strings.Contains(out, "dark_mode") {
		t.Fatalf("list after delete:\n%s", out)
	}
	if out := run("", "list", "--deleted"); !strings.Contains(out, "language (deleted)") {
		t.Fatalf("list --deleted:\n%s", out)
	}
	if out := run("", "list", "--namespace", "other"); !strings.Contains(out, "memory://user/x") || strings.Contains(out, "dark_mode") {
		t.Fatalf("other namespace:\n%s", out)
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"show", "memory://user/../x"}, 2, "invalid_uri"},
		{[]string{"remember", "file:///etc/x", "t"}, 2, "invalid_uri"},
		{[]string{"recall", "x", "--scope", "memory://tenant"}, 2, `unknown scope "tenant"`},
		{[]string{"show", "memory://user/nope"}, notFoundExit, "not_found"},
		{[]string{"remember", "memory://user/x", "t", "--meta", "novalue"}, 2, "key=value"},
		{[]string{"list", "-o", "yaml"}, 2, "--output"},
	} {
		code, _, errOut := rathctl(t, "", append([]string{"memory", "--store", store}, tc.args...)...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("memory %v: exit %d %q, want exit %d naming %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
	code, _, errOut := rathctl(t, strings.Repeat("x", memory.MaxTextBytes+1), "memory", "--store", store, "remember", "memory://user/huge")
	if code != 2 || !strings.Contains(errOut, "MaxTextBytes") {
		t.Fatalf("huge item: exit %d %s", code, errOut)
	}
}

// TestMemoryCommit archives a stored version's transcript with
// `rathctl memory commit`, the path an agent's commit: true takes, and
// recalls it with the version as its writer.
func TestMemoryCommit(t *testing.T) {
	t.Parallel()
	db := migrated(t, filepath.Join(t.TempDir(), "rath.db"))
	var root, v store.Info
	okJSON(t, &root, "session", "new", "--store", db, "--system", "Be brief.", "--user", "My favorite color is teal.")
	okJSON(t, &v, "session", "append", root.ID.String(), "--store", db, "--assistant", "Noted: teal.")

	var committed api.MemoryCommitReply
	okJSON(t, &committed, "memory", "--store", db, "commit", v.ID.String(), "--agent", "helper")
	it := committed.Transcript
	want := "system: Be brief.\nuser: My favorite color is teal.\nassistant: Noted: teal.\n"
	if it.URI != agent.TranscriptURI(v.ID) || it.VersionID != v.ID.String() || it.Text != want || it.Metadata["agent"] != "helper" || it.Metadata["kind"] != "commit" {
		t.Fatalf("commit: %+v", it)
	}
	var hitsReply api.RecallReply
	okJSON(t, &hitsReply, "memory", "--store", db, "recall", "favorite color", "-k", "1")
	hits := hitsReply.Hits
	if len(hits) != 1 || hits[0].URI != it.URI || hits[0].VersionID != v.ID.String() || hits[0].Score <= 0 {
		t.Fatalf("recall after commit: %+v", hits)
	}
	// Committing again rewrites the same item; the text form names it.
	code, out, errOut := rathctl(t, "", "memory", "--store", db, "commit", v.ID.String())
	if code != 0 || !strings.Contains(out, "committed "+it.URI) || !strings.Contains(out, "written by "+v.ID.String()) {
		t.Fatalf("commit again: exit %d %q %s", code, out, errOut)
	}
	var itemsReply api.MemoryList
	okJSON(t, &itemsReply, "memory", "--store", db, "list", "memory://session")
	items := itemsReply.Items
	if len(items) != 1 || items[0].CreatedAt != it.CreatedAt {
		t.Fatalf("list after second commit: %+v", items)
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"commit", "not-an-id"}, 2, "not-an-id"},
		{[]string{"commit", session.NewID().String()}, notFoundExit, "not found"},
		{[]string{"commit"}, 2, "accepts 1 arg"},
	} {
		code, _, errOut := rathctl(t, "", append([]string{"memory", "--store", db}, tc.args...)...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("memory %v: exit %d %q, want exit %d naming %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}
