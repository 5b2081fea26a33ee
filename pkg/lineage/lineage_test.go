package lineage_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/openrath"
	"github.com/rath-run/rath/pkg/session"
)

func TestBlame(t *testing.T) {
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			f := buildRun(t, st)
			got := must[[]lineage.Entry](t)(lineage.Blame(ctx, st, f.sel.ID()))
			tr := must[[]session.Chunk](t)(f.sel.Chunks(ctx))
			if len(got) != len(tr) {
				t.Fatalf("blame has %d entries, transcript %d chunks", len(got), len(tr))
			}
			type want struct {
				version session.ID
				agent   string
				tool    string
				callID  string
				via     int
			}
			wants := []want{
				{f.root.ID(), "", "", "", 0}, // system
				{f.root.ID(), "", "", "", 0}, // user
				{f.plan.ID(), "planner", "", "", 0},
				{f.a1.ID(), "agent-a", "search", "", 0},
				{f.a1.ID(), "agent-a", "search", "call-1", 0},
				{f.a1.ID(), "agent-a", "", "", 0},
				{f.b1.ID(), "agent-b", "", "", 1}, // carried by the merge
				{f.sel.ID(), "router", "", "", 0},
			}
			if len(got) != len(wants) {
				t.Fatalf("blame: %d entries, want %d: %+v", len(got), len(wants), got)
			}
			for i, w := range wants {
				e := got[i]
				if e.Ord != i || e.ChunkHash != tr[i].Hash() || e.Kind != tr[i].Kind() {
					t.Errorf("entry %d: ord %d kind %s hash %s, want %d %s %s", i, e.Ord, e.Kind, e.ChunkHash, i, tr[i].Kind(), tr[i].Hash())
				}
				if e.Version != w.version || e.Agent != w.agent || e.Tool != w.tool || e.CallID != w.callID || len(e.Via) != w.via {
					t.Errorf("entry %d = %+v, want version %s agent %q tool %q call %q via %d", i, e, w.version, w.agent, w.tool, w.callID, w.via)
				}
			}
			if e := got[6]; e.Via[0] != f.merge.ID() || e.Run != fixtureRun || e.Step != fixtureRun+"/02" || e.Model != "model-agent-b" || e.Worker != "worker-1" {
				t.Errorf("merged chunk blamed %+v, want via merge %s, run/step/model/worker of b1", e, f.merge.ID())
			}
			if e := got[4]; e.Snapshot != "snap-a" || e.Backend != "local" {
				t.Errorf("tool result blamed with workspace %q on %q, want snap-a on local", e.Snapshot, e.Backend)
			}

			// After compression the transcript is the summary and the answer.
			got = must[[]lineage.Entry](t)(lineage.Blame(ctx, st, f.final.ID()))
			if len(got) != 2 || got[0].Version != f.comp.ID() || got[0].Op != session.OpCompress || got[1].Agent != "writer" {
				t.Errorf("blame of the final version = %+v", got)
			}
			if _, err := lineage.Blame(ctx, st, session.NewID()); !errors.Is(err, session.ErrNotFound) {
				t.Errorf("blame of an unknown version: %v, want ErrNotFound", err)
			}
		})
	}
}

func TestPathAndCommonAncestor(t *testing.T) {
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			f := buildRun(t, st)
			ca, ok, err := lineage.CommonAncestor(ctx, st, f.c1.ID(), f.final.ID())
			if err != nil || !ok || ca != f.plan.ID() {
				t.Fatalf("common ancestor of c1 and final = %s %v %v, want plan %s", ca, ok, err, f.plan.ID())
			}
			if ca, _, _ := lineage.CommonAncestor(ctx, st, f.plan.ID(), f.final.ID()); ca != f.plan.ID() {
				t.Errorf("common ancestor of plan and its descendant = %s, want plan", ca)
			}
			p := must[[]session.ID](t)(lineage.Path(ctx, st, f.c1.ID(), f.final.ID()))
			if len(p) != 9 || p[0] != f.c1.ID() || p[1] != f.fc.ID() || p[2] != f.plan.ID() || p[8] != f.final.ID() {
				t.Fatalf("path c1 → final = %v", p)
			}
			p = must[[]session.ID](t)(lineage.Path(ctx, st, f.root.ID(), f.a1.ID()))
			if !slices.Equal(p, []session.ID{f.root.ID(), f.plan.ID(), f.fa.ID(), f.a1.ID()}) {
				t.Errorf("path root → a1 = %v", p)
			}
			other := must[session.Session](t)(session.New(ctx, st, session.User("unrelated")))
			if _, err := lineage.Path(ctx, st, other.ID(), f.final.ID()); !errors.Is(err, lineage.ErrNoPath) {
				t.Errorf("path between unrelated versions: %v, want ErrNoPath", err)
			}
		})
	}
}

func TestDiff(t *testing.T) {
	st := stores(t)["sqlite"]
	ctx := context.Background()
	f := buildRun(t, st)
	d := must[lineage.Delta](t)(lineage.Diff(ctx, st, f.a1.ID(), f.c1.ID()))
	if d.CommonPrefix != f.plan.Len() || len(d.OnlyA) != 3 || len(d.OnlyB) != 1 || d.OnlyB[0].Text != "by plane" {
		t.Errorf("diff a1 c1 = %+v", d)
	}
	if d.CommonAncestor == nil || *d.CommonAncestor != f.plan.ID() || d.SameWorkspace || d.SnapshotA != "snap-a" {
		t.Errorf("diff a1 c1: ancestor %v, workspace %q/%q same=%v", d.CommonAncestor, d.SnapshotA, d.SnapshotB, d.SameWorkspace)
	}
	d = must[lineage.Delta](t)(lineage.Diff(ctx, st, f.fa.ID(), f.fb.ID()))
	if d.CommonPrefix != f.plan.Len() || len(d.OnlyA)+len(d.OnlyB) != 0 || !d.SameWorkspace {
		t.Errorf("diff of two forks = %+v", d)
	}
}

func runGraph(t *testing.T, f runFixture, st lineage.Source) *lineage.Graph {
	t.Helper()
	in, out := f.root.ID(), f.final.ID()
	return must[*lineage.Graph](t)(lineage.ForRun(context.Background(), st, lineage.RunInfo{ID: fixtureRun, Input: &in, Output: &out}))
}

func TestGraphOfRun(t *testing.T) {
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			f := buildRun(t, st)
			// Another run's work on the same input stays out of the picture.
			must[session.Session](t)(f.root.Append(context.Background(), session.User("another run")))
			g := runGraph(t, f, st)
			status := map[session.ID]string{}
			for _, n := range g.Nodes {
				status[n.ID] = n.Status
			}
			all := []session.Session{f.root, f.plan, f.fa, f.fb, f.fc, f.a1, f.b1, f.c1, f.merge, f.sel, f.comp, f.final}
			// plus b1's move to the merge's backend
			if len(g.Nodes) != len(all)+1 {
				t.Errorf("run graph has %d nodes, want %d", len(g.Nodes), len(all)+1)
			}
			wants := map[session.ID]string{
				f.root.ID(): lineage.StatusContext, f.plan.ID(): lineage.StatusOK, f.a1.ID(): lineage.StatusOK,
				f.b1.ID(): lineage.StatusOK, f.merge.ID(): lineage.StatusOK, f.final.ID(): lineage.StatusOutput,
				f.fc.ID(): lineage.StatusRejected, f.c1.ID(): lineage.StatusRejected,
			}
			for id, w := range wants {
				if status[id] != w {
					t.Errorf("status of %s = %q, want %q", id, status[id], w)
				}
			}
			kinds := map[string]int{}
			for _, e := range g.Edges {
				kinds[e.Kind]++
			}
			if kinds["merge"] != 2 || kinds["fork"] != 3 || kinds["compress"] != 1 || kinds["step"] != 6 || kinds["place"] != 1 {
				t.Errorf("edge kinds = %v", kinds)
			}
			for _, n := range g.Nodes {
				if n.ID == f.sel.ID() && !slices.Contains(n.Labels, "selected:writer") {
					t.Errorf("selector node labels = %v, want selected:writer", n.Labels)
				}
				if n.ID == f.a1.ID() && (!slices.Contains(n.Labels, "tool:search") || n.OwnTokens != 20 || n.Tokens != 30 || n.Chunks != 3) {
					t.Errorf("a1 node = %+v", n)
				}
			}
		})
	}
}

func TestGraphFormats(t *testing.T) {
	st := stores(t)["sqlite"]
	ctx := context.Background()
	f := buildRun(t, st)
	d := must[session.Session](t)(f.final.Detach(ctx))
	must[session.Session](t)(d.Append(ctx, session.User("<go on> & \"quote\"")))
	g := must[*lineage.Graph](t)(lineage.ForRoot(ctx, st, f.root.ID(), nil))
	if len(g.Nodes) != 13 {
		t.Fatalf("graph of the root has %d nodes, want 13 (the detached root is not a descendant)", len(g.Nodes))
	}
	for _, format := range lineage.Formats() {
		var b bytes.Buffer
		if err := g.Write(&b, format); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		for _, n := range g.Nodes {
			want := n.ID.String()
			if format == lineage.FormatMermaid {
				want = n.ID.String()[len(want)-8:]
			}
			if !strings.Contains(b.String(), want) {
				t.Errorf("%s output lacks node %s", format, n.ID)
			}
		}
	}
	var b bytes.Buffer
	if err := g.WriteOpenRath(&b); err != nil {
		t.Fatal(err)
	}
	recs := must[[]openrath.LineageRecord](t)(openrath.ReadLineage(&b))
	if len(recs) != len(g.Nodes) {
		t.Fatalf("openrath export: %d records, want %d", len(recs), len(g.Nodes))
	}
	for _, r := range recs {
		if r.ID == f.merge.ID().String() && len(r.ParentSessionIDs) != 2 {
			t.Errorf("merge record parents = %v", r.ParentSessionIDs)
		}
	}
	if _, err := lineage.ParseFormat("png"); err == nil || !strings.Contains(err.Error(), "svg") {
		t.Errorf("ParseFormat(png) = %v, want an error listing the formats", err)
	}
}

// svgShape counts an SVG's node groups and edge paths, parsing it as XML.
func svgShape(t *testing.T, r io.Reader) (nodes map[string]string, edges int) {
	t.Helper()
	dec := xml.NewDecoder(r)
	nodes = map[string]string{}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nodes, edges
		}
		if err != nil {
			t.Fatalf("SVG is not XML: %v", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		attr := map[string]string{}
		for _, a := range se.Attr {
			attr[a.Name.Local] = a.Value
		}
		switch {
		case se.Name.Local == "g" && attr["class"] == "node":
			nodes[attr["id"]] = attr["data-status"]
		case se.Name.Local == "path" && attr["class"] == "edge":
			edges++
		}
	}
}

func TestSVG(t *testing.T) {
	st := stores(t)["sqlite"]
	ctx := context.Background()
	f := buildRun(t, st)
	d := must[session.Session](t)(f.final.Detach(ctx))
	must[session.Session](t)(d.Append(ctx, session.User("<tag> & \"quotes\" \x01")))
	for _, g := range []*lineage.Graph{
		runGraph(t, f, st),
		must[*lineage.Graph](t)(lineage.Around(ctx, st, f.final.ID(), 0)),
		must[*lineage.Graph](t)(lineage.ForRoot(ctx, st, f.root.ID(), nil)),
	} {
		var b bytes.Buffer
		if err := g.WriteSVG(&b); err != nil {
			t.Fatal(err)
		}
		nodes, edges := svgShape(t, &b)
		if len(nodes) != len(g.Nodes) || edges != len(g.Edges) {
			t.Errorf("%s: SVG has %d nodes and %d edges, graph %d and %d", g.Title, len(nodes), edges, len(g.Nodes), len(g.Edges))
		}
		for _, n := range g.Nodes {
			if nodes["v-"+n.ID.String()] != n.Status {
				t.Errorf("%s: SVG node %s status %q, want %q", g.Title, n.ID, nodes["v-"+n.ID.String()], n.Status)
			}
		}
	}
}

// TestSVGLarge lays out 200 versions (a chain with fan-outs and merges)
// and checks every node and edge is drawn and no two boxes overlap.
func TestSVGLarge(t *testing.T) {
	st := stores(t)["sqlite"]
	ctx := context.Background()
	s := must[session.Session](t)(session.New(ctx, st, session.User("start")))
	root := s
	for len(must[*lineage.Graph](t)(lineage.ForRoot(ctx, st, root.ID(), nil)).Nodes) < 200 {
		a := must[session.Session](t)(s.Fork(ctx))
		b := must[session.Session](t)(s.Fork(ctx))
		a = must[session.Session](t)(a.Append(ctx, session.Assistant("a")))
		b = must[session.Session](t)(b.Append(ctx, session.Assistant("b")))
		must[session.Session](t)(s.Append(ctx, session.Assistant("abandoned")))
		s = must[session.Session](t)(a.Merge(ctx, b))
	}
	g := must[*lineage.Graph](t)(lineage.ForRoot(ctx, st, root.ID(), nil))
	var b bytes.Buffer
	if err := g.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	raw := b.Bytes()
	nodes, edges := svgShape(t, bytes.NewReader(raw))
	if len(nodes) != len(g.Nodes) || edges != len(g.Edges) {
		t.Fatalf("SVG has %d nodes and %d edges, graph %d and %d", len(nodes), edges, len(g.Nodes), len(g.Edges))
	}
	rects := boxes(t, raw)
	for i := range rects {
		for j := i + 1; j < len(rects); j++ {
			a, c := rects[i], rects[j]
			if a[0] < c[0]+c[2] && c[0] < a[0]+a[2] && a[1] < c[1]+c[3] && c[1] < a[1]+a[3] {
				t.Fatalf("boxes %d and %d overlap: %v %v", i, j, a, c)
			}
		}
	}
}

// boxes returns the x, y, width, height of each node's outer rect.
func boxes(t *testing.T, raw []byte) [][4]float64 {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(raw))
	var out [][4]float64
	inNode, first := false, false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			attr := map[string]string{}
			for _, a := range se.Attr {
				attr[a.Name.Local] = a.Value
			}
			if se.Name.Local == "g" {
				inNode, first = attr["class"] == "node", true
			}
			if inNode && first && se.Name.Local == "rect" {
				first = false
				var r [4]float64
				for k, name := range []string{"x", "y", "width", "height"} {
					if _, err := fmtSscan(attr[name], &r[k]); err != nil {
						t.Fatalf("rect %s=%q: %v", name, attr[name], err)
					}
				}
				out = append(out, r)
			}
		}
	}
}
