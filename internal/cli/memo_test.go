package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/llm/llmtest"
	"github.com/rath-run/rath/pkg/store"
)

// TestMemoryCommitExtract: `rathctl memory commit --extract --model M`
// resolves the model from the environment (a fake OpenAI endpoint), writes
// the archive and one item per memo, and recalls them; a reply that is not
// a memo list leaves the archive and warns on stderr.
func TestMemoryCommitExtract(t *testing.T) {
	srv := llmtest.NewServer(t)
	t.Setenv("RATH_HOME", t.TempDir())
	t.Setenv("OPENAI_BASE_URL", srv.URL())
	t.Setenv("OPENAI_API_KEY", "sk-test")
	db := migrated(t, filepath.Join(t.TempDir(), "rath.db"))
	var root, v store.Info
	okJSON(t, &root, "session", "new", "--store", db, "--user", "My favorite color is teal.")
	okJSON(t, &v, "session", "append", root.ID.String(), "--store", db, "--assistant", "Noted: teal.")

	srv.Enqueue(llmtest.Reply{Content: `["The user's favorite color is teal."]`})
	var res agent.CommitResult
	okJSON(t, &res, "memory", "--store", db, "commit", v.ID.String(), "--extract", "--model", "fake-chat")
	if res.Warning != "" || res.Transcript.URI != agent.TranscriptURI(v.ID) || len(res.Memos) != 1 {
		t.Fatalf("commit: %+v", res)
	}
	m := res.Memos[0]
	if m.URI != agent.MemoURI(v.ID, 0) || m.VersionID != v.ID.String() || m.Metadata["source"] != "extraction" {
		t.Fatalf("memo: %+v", m)
	}
	if reqs := srv.Requests(); len(reqs) != 1 || reqs[0].Model != "fake-chat" {
		t.Fatalf("requests: %+v", reqs)
	}
	var hitsReply api.RecallReply
	okJSON(t, &hitsReply, "memory", "--store", db, "recall", "favorite color", "--scope", "memory://session/"+v.ID.String()+"/memos/", "-k", "1")
	hits := hitsReply.Hits
	if len(hits) != 1 || hits[0].URI != m.URI || hits[0].VersionID != v.ID.String() {
		t.Fatalf("recall: %+v", hits)
	}

	// A malformed reply: exit 0, the archive written, a warning on stderr.
	srv.Enqueue(llmtest.Reply{Content: "The user likes teal."})
	code, out, errOut := rathctl(t, "", "memory", "--store", db, "commit", root.ID.String(), "--extract", "--model", "fake-chat")
	if code != 0 || !strings.Contains(out, "committed "+agent.TranscriptURI(root.ID)) || strings.Contains(out, "memo ") ||
		!strings.Contains(errOut, "warning: memo extraction failed") || !strings.Contains(errOut, "bad memo list") {
		t.Fatalf("malformed: exit %d %q %q", code, out, errOut)
	}
	var itemsReply api.MemoryList
	okJSON(t, &itemsReply, "memory", "--store", db, "list", "memory://session/"+root.ID.String()+"/")
	items := itemsReply.Items
	if len(items) != 1 || items[0].URI != agent.TranscriptURI(root.ID) {
		t.Fatalf("items after malformed reply: %+v", items)
	}

	if code, _, errOut := rathctl(t, "", "memory", "--store", db, "commit", v.ID.String(), "--model", "x"); code != 2 || !strings.Contains(errOut, "need --extract") {
		t.Fatalf("--model without --extract: exit %d %q", code, errOut)
	}
}
