package lineage_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/session"
)

func dossierFixture(t *testing.T) (runFixture, session.Session, *lineage.Dossier) {
	t.Helper()
	st := stores(t)["sqlite"]
	f := buildRun(t, st)
	recall := must[session.Chunk](t)(session.Evidence(session.KindMemoryRecall, map[string]any{"query": "trip", "hits": []string{"memory://prefs/trains"}}))
	approval := must[session.Chunk](t)(session.Evidence(session.KindApproval, map[string]any{"call_id": "call-9", "decision": "approved", "by": "alice"}))
	last := step(t, f.final, 7, "writer", "snap-final", 9, recall, approval, session.Assistant("<b>take the 9:15 train</b>"))
	in, out := f.root.ID(), last.ID()
	d := must[*lineage.Dossier](t)(lineage.BuildDossier(context.Background(), st, lineage.RunInfo{ID: fixtureRun, Input: &in, Output: &out},
		lineage.DossierOptions{Status: "succeeded", Prices: map[string]lineage.Price{"model-agent-a": {Prompt: 1, Completion: 2}},
			MemoryWritten: []lineage.MemoryWrite{{Namespace: "agent", URI: "memory://session/x/memos/0", Text: "likes trains", Version: out.String()}}}))
	return f, last, d
}

// sections parses an HTML page and returns the text of each <section id>,
// failing on anything that would fetch from the network.
func sections(t *testing.T, page []byte) map[string]string {
	t.Helper()
	doc, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var text func(n *html.Node, b *strings.Builder)
	text = func(n *html.Node, b *strings.Builder) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
			b.WriteString(" ")
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			text(c, b)
		}
	}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			for _, a := range n.Attr {
				if (a.Key == "src" || a.Key == "href") && a.Val != "" && !strings.HasPrefix(a.Val, "#") {
					t.Errorf("<%s %s=%q> would leave the page", n.Data, a.Key, a.Val)
				}
			}
			if n.Data == "script" || n.Data == "link" || n.Data == "iframe" {
				t.Errorf("page has a <%s>", n.Data)
			}
			if n.Data == "section" {
				for _, a := range n.Attr {
					if a.Key == "id" {
						var b strings.Builder
						text(n, &b)
						out[a.Val] = strings.Join(strings.Fields(b.String()), " ")
					}
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return out
}

func TestDossierHTML(t *testing.T) {
	f, last, d := dossierFixture(t)
	var b bytes.Buffer
	if err := d.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "<b>take the") {
		t.Error("the answer's markup reached the page unescaped")
	}
	secs := sections(t, b.Bytes())
	wants := map[string][]string{
		"summary":   {"succeeded", f.root.ID().String(), last.ID().String()},
		"route":     {f.plan.ID().String(), f.a1.ID().String(), f.merge.ID().String(), f.c1.ID().String() + " step by agent-c (rejected)", "chose writer"},
		"tools":     {"search", "call-1", `"q": "trains"`, `"hits": 3`, "snap-a", "local"},
		"workspace": {"snap-a", "snap-final"},
		"memory":    {"memory://prefs/trains", "likes trains", "memory://session/x/memos/0"},
		"approvals": {"alice", "approved"},
		"usage":     {"agent-a", "agent-b", "agent-c", "writer", "compressor", "0.000021", "trunk 1 4 1 5"},
		"output":    {"<b>take the 9:15 train</b>", last.ID().String()},
		"anchor":    {last.Version().Hash, "verifies: 12 versions"},
	}
	for id, ws := range wants {
		got, ok := secs[id]
		if !ok {
			t.Errorf("no section %q", id)
			continue
		}
		for _, w := range ws {
			if !strings.Contains(got, w) {
				t.Errorf("section %q lacks %q:\n%s", id, w, got)
			}
		}
	}
	if g := secs["graph"]; !strings.Contains(g, "step · agent-a") {
		t.Errorf("graph section has no picture: %q", g)
	}
}

func TestDossierMarkdown(t *testing.T) {
	f, last, d := dossierFixture(t)
	var b bytes.Buffer
	if err := d.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, w := range []string{"## Graph", "```mermaid", "<svg", "## Route taken", f.c1.ID().String(), "chose **writer**", "## Tool calls",
		"search `call-1`", "## Workspace changes", "## Memory", "likes trains", "## Approvals", "alice", "## Usage and cost", "## Final output",
		"take the 9:15 train", "## Anchor", last.Version().Hash} {
		if !strings.Contains(md, w) {
			t.Errorf("markdown lacks %q", w)
		}
	}
}
