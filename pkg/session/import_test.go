package session_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/session"
)

// TestImportBatchesAgree: streaming an import in batches (as into a
// store) gives the same result and the same error, word for word, as
// checking the whole file first, whatever the batch size.
func TestImportBatchesAgree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g, head := richGraph(t)
	good := export(t, g, head.ID())
	m := session.NewMemoryGraph()
	root := must(t)(session.FromUserMessage(ctx, m, "hello"))
	child := must(t)(root.Append(ctx, session.Assistant("world")))
	grand := must(t)(child.Append(ctx, session.User("again")))
	lines := strings.SplitAfter(string(export(t, m, grand.ID())), "\n") // header, root, child, grand, ""
	hdr, r, c, gc := lines[0], lines[1], lines[2], lines[3]
	id1, id2 := session.NewID(), session.NewID()
	cyc := func(id, parent session.ID) string {
		return fmt.Sprintf(`{"record":"version","id":"%s","parents":["%s"],"base":"%s","op":"append","chunks":[],"len":0,"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0},"created_at":"2026-01-01T00:00:00Z","hash":"x"}`+"\n", id, parent, parent)
	}
	cycHdr := strings.Replace(hdr, grand.ID().String(), id1.String(), 1)
	files := map[string]string{
		"good":               string(good),
		"out of order":       hdr + c + r + gc,
		"grandchild first":   hdr + gc + r + c,
		"cycle":              cycHdr + cyc(id1, id2) + cyc(id2, id1),
		"self parent":        cycHdr + cyc(id1, id1),
		"absent parent":      hdr + c + gc,
		"hash mismatch":      hdr + r + strings.Replace(c, "world", "w0rld", 1) + gc,
		"late hash, bad end": hdr + r + strings.Replace(c, "world", "w0rld", 1) + gc + "{not json\n",
		"duplicate":          hdr + r + c + r + gc,
		"unknown op":         hdr + strings.Replace(r, `"op":"create"`, `"op":"teleport"`, 1) + c + gc,
		"no head":            hdr + r + c,
	}
	for name, in := range files {
		_, want := session.Import(ctx, session.NewMemoryGraph(), strings.NewReader(in))
		if (want == nil) != (name == "good") {
			t.Fatalf("%s: import error %v", name, want)
		}
		for _, n := range []int{1, 2} {
			got, err := session.ImportInBatches(ctx, session.NewMemoryGraph(), bytes.NewReader([]byte(in)), n)
			if fmt.Sprint(err) != fmt.Sprint(want) {
				t.Errorf("%s, batches of %d: error %v, want %v", name, n, err, want)
			}
			if want == nil && got.Hash() != head.Hash() {
				t.Errorf("%s, batches of %d: head hash %s, want %s", name, n, got.Hash(), head.Hash())
			}
		}
	}
}
