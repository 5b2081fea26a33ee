package lineage

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/rath-run/rath/pkg/session"
)

// Layout constants of the SVG picture, in pixels.
const (
	boxW       = 216.0
	boxH       = 60.0
	gapX       = 28.0
	gapY       = 54.0
	margin     = 24.0
	titleH     = 34.0
	legendH    = 40.0
	sweeps     = 12
	dummyWidth = 8.0
	fontStack  = "-apple-system, 'Segoe UI', Helvetica, Arial, sans-serif"
	monoStack  = "ui-monospace, 'SF Mono', Menlo, Consolas, monospace"
)

// item is a node or a dummy point of a long edge in the layout.
type item struct {
	node  int // index into g.Nodes, or -1 for a dummy
	layer int
	pos   int // order within its layer
	x     float64
	up    []int // items in the layer above linked to this one
	down  []int // items in the layer below
}

func (it *item) width() float64 {
	if it.node < 0 {
		return dummyWidth
	}
	return boxW
}

// layout places g's nodes: longest-path layers top to bottom, dummy points
// on edges that span layers, barycentre ordering within layers, then
// x coordinates pulled towards linked items without overlapping. It
// returns the items, the layers (item indices in order) and, per edge, the
// chain of items it passes through.
func (g *Graph) layout() ([]item, [][]int, [][]int) {
	n := len(g.Nodes)
	index := make(map[session.ID]int, n)
	for i, nd := range g.Nodes {
		index[nd.ID] = i
	}
	parents := make([][]int, n)
	children := make([][]int, n)
	for _, e := range g.Edges {
		f, t := index[e.From], index[e.To]
		parents[t] = append(parents[t], f)
		children[f] = append(children[f], t)
	}
	// Longest-path layering in topological order (Kahn); nodes left over
	// by a cycle keep layer 0.
	layer := make([]int, n)
	indeg := make([]int, n)
	for i := range n {
		indeg[i] = len(parents[i])
	}
	var queue []int
	for i := range n {
		if indeg[i] == 0 {
			queue = append(queue, i)
		}
	}
	for len(queue) > 0 {
		x := queue[0]
		queue = queue[1:]
		for _, c := range children[x] {
			layer[c] = max(layer[c], layer[x]+1)
			if indeg[c]--; indeg[c] == 0 {
				queue = append(queue, c)
			}
		}
	}
	items := make([]item, n, n*2)
	for i := range n {
		items[i] = item{node: i, layer: layer[i]}
	}
	chains := make([][]int, len(g.Edges))
	for ei, e := range g.Edges {
		f, t := index[e.From], index[e.To]
		chain := []int{f}
		if layer[t] > layer[f] {
			for l := layer[f] + 1; l < layer[t]; l++ {
				items = append(items, item{node: -1, layer: l})
				chain = append(chain, len(items)-1)
			}
		}
		chain = append(chain, t)
		for k := 1; k < len(chain); k++ {
			a, b := chain[k-1], chain[k]
			items[a].down = append(items[a].down, b)
			items[b].up = append(items[b].up, a)
		}
		chains[ei] = chain
	}
	depth := 0
	for _, it := range items {
		depth = max(depth, it.layer+1)
	}
	layers := make([][]int, depth)
	for i, it := range items {
		layers[it.layer] = append(layers[it.layer], i)
	}
	renumber := func(l []int) {
		for p, i := range l {
			items[i].pos = p
		}
	}
	for _, l := range layers {
		renumber(l)
	}
	// Barycentre sweeps, alternately downwards and upwards.
	bary := func(i int, nb []int) float64 {
		if len(nb) == 0 {
			return float64(items[i].pos)
		}
		s := 0.0
		for _, j := range nb {
			s += float64(items[j].pos)
		}
		return s / float64(len(nb))
	}
	for s := range sweeps {
		down := s%2 == 0
		for k := range depth {
			l := k
			if !down {
				l = depth - 1 - k
			}
			keys := make(map[int]float64, len(layers[l]))
			for _, i := range layers[l] {
				if down {
					keys[i] = bary(i, items[i].up)
				} else {
					keys[i] = bary(i, items[i].down)
				}
			}
			slices.SortStableFunc(layers[l], func(a, b int) int { return cmp.Compare(keys[a], keys[b]) })
			renumber(layers[l])
		}
	}
	// x coordinates: start packed, then pull each layer towards the
	// centers of its linked items, keeping order and spacing (the average
	// of a left-packed and a right-packed placement keeps both).
	for _, l := range layers {
		x := 0.0
		for k, i := range l {
			if k > 0 {
				x += sep(items, l[k-1], i)
			}
			items[i].x = x
		}
	}
	for s := range sweeps * 2 {
		down := s%2 == 0
		for k := range depth {
			l := k
			if !down {
				l = depth - 1 - k
			}
			place(items, layers[l])
		}
	}
	minX := math.Inf(1)
	for _, it := range items {
		minX = min(minX, it.x-it.width()/2)
	}
	for i := range items {
		items[i].x += margin - minX
	}
	return items, layers, chains
}

func sep(items []item, a, b int) float64 {
	return (items[a].width()+items[b].width())/2 + gapX
}

// place moves one layer's items towards the mean x of their neighbors,
// keeping their order and spacing.
func place(items []item, l []int) {
	if len(l) == 0 {
		return
	}
	want := make([]float64, len(l))
	for k, i := range l {
		// Pull towards every linked item, above and below: a merge then
		// sits between its branches and the branches between their fork
		// and merge, so chains of fan-outs stay straight instead of
		// drifting to one side.
		nb := append(slices.Clone(items[i].up), items[i].down...)
		if len(nb) == 0 {
			want[k] = items[i].x
			continue
		}
		s := 0.0
		for _, j := range nb {
			s += items[j].x
		}
		want[k] = s / float64(len(nb))
	}
	left := make([]float64, len(l))
	right := make([]float64, len(l))
	for k := range l {
		left[k] = want[k]
		if k > 0 {
			left[k] = max(want[k], left[k-1]+sep(items, l[k-1], l[k]))
		}
	}
	for k := len(l) - 1; k >= 0; k-- {
		right[k] = want[k]
		if k < len(l)-1 {
			right[k] = min(want[k], right[k+1]-sep(items, l[k], l[k+1]))
		}
	}
	for k, i := range l {
		items[i].x = (left[k] + right[k]) / 2
	}
}

type point struct{ x, y float64 }

// WriteSVG writes g as a standalone SVG picture laid out in process: one
// <g class="node"> per version and one <path class="edge"> per link.
func (g *Graph) WriteSVG(w io.Writer) error {
	items, layers, chains := g.layout()
	width := 2*margin + boxW
	for _, it := range items {
		width = max(width, it.x+it.width()/2+margin)
	}
	width = max(width, 520)
	top := margin + titleH
	yOf := func(layer int) float64 { return top + float64(layer)*(boxH+gapY) + boxH/2 }
	height := top + float64(len(layers))*(boxH+gapY) - gapY + margin + legendH

	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="%s">`+"\n",
		width, height, width, height, fontStack)
	fmt.Fprintf(bw, "<title>%s</title>\n", xmlText(g.Title))
	fmt.Fprint(bw, `<rect width="100%" height="100%" fill="#ffffff"/>`+"\n")
	// One arrowhead per edge color.
	fmt.Fprint(bw, "<defs>\n")
	seen := make(map[string]bool)
	for _, e := range g.Edges {
		c := edgeColor(e.Kind)
		if seen[c] {
			continue
		}
		seen[c] = true
		fmt.Fprintf(bw, `<marker id="arrow-%s" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="%s"/></marker>`+"\n", c[1:], c)
	}
	fmt.Fprint(bw, "</defs>\n")
	fmt.Fprintf(bw, `<text x="%.0f" y="%.0f" font-size="15" font-weight="600" fill="#101828">%s</text>`+"\n", margin, margin+14, xmlText(g.Title))

	// Edges first, so boxes sit on top of them.
	incoming := make(map[int]int)
	for _, ch := range chains {
		incoming[ch[len(ch)-1]]++
	}
	slot := make(map[int]int)
	fmt.Fprint(bw, `<g class="edges" fill="none">`+"\n")
	for ei, e := range g.Edges {
		ch := chains[ei]
		to := ch[len(ch)-1]
		// Spread the ends of several edges into one node.
		off := (float64(slot[to]) - float64(incoming[to]-1)/2) * 18
		slot[to]++
		pts := make([]point, 0, len(ch))
		from := items[ch[0]]
		pts = append(pts, point{from.x, yOf(from.layer) + boxH/2})
		for _, d := range ch[1 : len(ch)-1] {
			pts = append(pts, point{items[d].x, yOf(items[d].layer)})
		}
		end := items[to]
		endY := yOf(end.layer) - boxH/2 - 1
		if end.layer <= from.layer { // a cycle's back edge: go round
			endY = yOf(end.layer) + boxH/2
		}
		pts = append(pts, point{end.x + off, endY})
		c := edgeColor(e.Kind)
		dash := ""
		if dashedEdge(e) {
			dash = ` stroke-dasharray="5 4"`
		}
		fmt.Fprintf(bw, `<path class="edge" data-from="%s" data-to="%s" data-kind="%s" d="%s" stroke="%s" stroke-width="1.6"%s marker-end="url(#arrow-%s)"/>`+"\n",
			e.From, e.To, xmlText(e.Kind), curve(pts), c, dash, c[1:])
		if e.Kind != string(session.OpStep) && e.Kind != string(session.OpAppend) {
			a, b := pts[len(pts)-2], pts[len(pts)-1]
			fmt.Fprintf(bw, `<text class="edge-label" x="%.1f" y="%.1f" font-size="10" fill="%s" stroke="#ffffff" stroke-width="3" paint-order="stroke">%s</text>`+"\n",
				(a.x+b.x)/2+6, (a.y+b.y)/2+3, c, xmlText(e.Kind))
		}
	}
	fmt.Fprint(bw, "</g>\n")

	fmt.Fprint(bw, `<g class="nodes">`+"\n")
	for i := range g.Nodes {
		n := g.Nodes[i]
		it := items[i]
		x, y := it.x-boxW/2, yOf(it.layer)-boxH/2
		fill, stroke := colors(n.Status)
		dash := ""
		if dashedNode(n.Status) {
			dash = ` stroke-dasharray="5 3"`
		}
		sw := "1.4"
		if n.Status == StatusOutput {
			sw = "2.4"
		}
		fmt.Fprintf(bw, `<g class="node" id="v-%s" data-status="%s">`, n.ID, n.Status)
		fmt.Fprintf(bw, "<title>%s</title>", xmlText(tooltip(n)))
		fmt.Fprintf(bw, `<rect x="%.1f" y="%.1f" width="%.0f" height="%.0f" rx="9" fill="%s" stroke="%s" stroke-width="%s"%s/>`,
			x, y, boxW, boxH, fill, stroke, sw, dash)
		fmt.Fprintf(bw, `<rect x="%.1f" y="%.1f" width="5" height="%.0f" rx="2" fill="%s"/>`, x+3, y+8, boxH-16, stroke)
		fmt.Fprintf(bw, `<text x="%.1f" y="%.1f" font-size="12.5" font-weight="600" fill="#101828">%s</text>`, x+14, y+18, xmlText(clip(n.title(), 30)))
		fmt.Fprintf(bw, `<text x="%.1f" y="%.1f" font-size="11" fill="#344054">%s</text>`, x+14, y+34, xmlText(clip(n.detail(), 34)))
		fmt.Fprintf(bw, `<text x="%.1f" y="%.1f" font-size="10" font-family="%s" fill="#667085">%s</text>`, x+14, y+50, monoStack, xmlText(clip(n.footer(), 32)))
		fmt.Fprint(bw, "</g>\n")
	}
	fmt.Fprint(bw, "</g>\n")

	// Legend: the statuses present.
	present := make(map[string]bool)
	for _, n := range g.Nodes {
		present[n.Status] = true
	}
	lx, ly := margin, height-margin-10
	fmt.Fprint(bw, `<g class="legend" font-size="11" fill="#344054">`+"\n")
	for _, s := range []string{StatusOutput, StatusOK, StatusHead, StatusRejected, StatusFailed, StatusContext} {
		if !present[s] {
			continue
		}
		fill, stroke := colors(s)
		fmt.Fprintf(bw, `<rect x="%.0f" y="%.0f" width="14" height="14" rx="3" fill="%s" stroke="%s"/><text x="%.0f" y="%.0f">%s</text>`+"\n",
			lx, ly-11, fill, stroke, lx+19, ly, s)
		lx += 30 + float64(len(s))*6.5
	}
	fmt.Fprint(bw, "</g>\n</svg>\n")
	return bw.Flush()
}

// curve draws a smooth vertical path through pts.
func curve(pts []point) string {
	var b strings.Builder
	fmt.Fprintf(&b, "M%.1f,%.1f", pts[0].x, pts[0].y)
	for k := 1; k < len(pts); k++ {
		a, c := pts[k-1], pts[k]
		dy := (c.y - a.y) / 2
		if dy < 0 {
			dy = -dy
		}
		fmt.Fprintf(&b, " C%.1f,%.1f %.1f,%.1f %.1f,%.1f", a.x, a.y+dy, c.x, c.y-dy, c.x, c.y)
	}
	return b.String()
}

func tooltip(n Node) string {
	s := fmt.Sprintf("%s\nop %s · status %s\n%d chunks (transcript %d) · %d tokens", n.ID, n.Op, n.Status, n.Chunks, n.Len, n.Tokens)
	if n.Run != "" {
		s += "\nrun " + n.Run
	}
	if n.Step != "" {
		s += " · step " + n.Step
	}
	if n.Model != "" {
		s += "\nmodel " + n.Model
	}
	if n.Snapshot != "" {
		s += "\nworkspace " + n.Snapshot
	}
	s += "\nhash " + n.Hash
	return s
}

// clip cuts s to n runes with "…".
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// xmlText escapes s for XML text and attribute values, dropping
// characters XML 1.0 cannot carry.
func xmlText(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '&':
			b.WriteString("&amp;")
		case r == '<':
			b.WriteString("&lt;")
		case r == '>':
			b.WriteString("&gt;")
		case r == '"':
			b.WriteString("&quot;")
		case r == '\'':
			b.WriteString("&#39;")
		case r == '\n':
			b.WriteString("&#10;")
		case r == '\t' || r == '\r' || (r >= 0x20 && r <= 0xD7FF) || (r >= 0xE000 && r <= 0xFFFD) || (r >= 0x10000 && r <= 0x10FFFF):
			b.WriteRune(r)
		}
	}
	return b.String()
}
