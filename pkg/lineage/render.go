package lineage

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/rath-run/rath/pkg/openrath"
	"github.com/rath-run/rath/pkg/session"
)

// Format names a way to write a [Graph].
type Format string

// Formats.
const (
	FormatJSON     Format = "json"
	FormatDOT      Format = "dot"
	FormatMermaid  Format = "mermaid"
	FormatSVG      Format = "svg"
	FormatOpenRath Format = "openrath-jsonl"
)

// Formats lists the formats Write accepts.
func Formats() []Format {
	return []Format{FormatJSON, FormatDOT, FormatMermaid, FormatSVG, FormatOpenRath}
}

// ParseFormat checks a format name.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats() {
		if string(f) == s {
			return f, nil
		}
	}
	names := make([]string, 0, len(Formats()))
	for _, f := range Formats() {
		names = append(names, string(f))
	}
	return "", fmt.Errorf("format %q: want one of %s", s, strings.Join(names, ", "))
}

// ContentType is the media type of a format.
func (f Format) ContentType() string {
	switch f {
	case FormatJSON:
		return "application/json"
	case FormatSVG:
		return "image/svg+xml"
	case FormatOpenRath:
		return "application/x-ndjson"
	default:
		return "text/plain; charset=utf-8"
	}
}

// Write writes g to w in format f.
func (g *Graph) Write(w io.Writer, f Format) error {
	switch f {
	case FormatJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(g)
	case FormatDOT:
		return g.WriteDOT(w)
	case FormatMermaid:
		return g.WriteMermaid(w)
	case FormatSVG:
		return g.WriteSVG(w)
	case FormatOpenRath:
		return g.WriteOpenRath(w)
	}
	_, err := ParseFormat(string(f))
	return err
}

// ErrNoVersions means a graph decoded from JSON was asked for an export
// that needs the versions themselves.
var ErrNoVersions = errors.New("lineage: graph holds no versions (it was not built from a store)")

// WriteOpenRath writes the graph's versions as OpenRath's lineage JSONL
// (export_jsonl), in creation order: OpenRath's tools read it.
func (g *Graph) WriteOpenRath(w io.Writer) error {
	if g.versions == nil {
		return ErrNoVersions
	}
	recs := make([]openrath.LineageRecord, 0, len(g.Nodes))
	for _, n := range g.Nodes {
		rec, err := openrath.LineageRecordOf(g.versions[n.ID])
		if err != nil {
			return fmt.Errorf("lineage: version %s: %w", n.ID, err)
		}
		recs = append(recs, rec)
	}
	return openrath.WriteLineage(w, recs)
}

// Version returns a version the graph was built from, if it holds it.
func (g *Graph) Version(id session.ID) (*session.Version, bool) {
	v, ok := g.versions[id]
	return v, ok
}

// shortID is the part of an id a picture shows: UUIDv7 ids share their
// leading (time) digits, so the random tail tells versions apart.
func shortID(id session.ID) string {
	s := id.String()
	return s[len(s)-8:]
}

// title is a node's first line: op and who made it.
func (n Node) title() string {
	who := n.Agent
	if who == "" {
		who = n.Model
	}
	if who == "" {
		return string(n.Op)
	}
	return string(n.Op) + " · " + who
}

// detail is a node's second line: chunks and tokens.
func (n Node) detail() string {
	s := plural(n.Chunks, "chunk")
	if n.OwnTokens > 0 {
		s += " · +" + strconv.FormatInt(n.OwnTokens, 10) + " tok"
	} else if n.Tokens > 0 {
		s += " · " + strconv.FormatInt(n.Tokens, 10) + " tok"
	}
	return s
}

// footer is a node's third line: short id and labels.
func (n Node) footer() string {
	s := shortID(n.ID)
	if len(n.Labels) > 0 {
		s += " · " + strings.Join(n.Labels, " ")
	}
	return s
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// palette is the fill and stroke color of each status.
var palette = map[string][2]string{
	StatusOutput:   {"#d1fadf", "#039855"},
	StatusOK:       {"#eef4ff", "#3e63dd"},
	StatusHead:     {"#f2f4f7", "#475467"},
	StatusRejected: {"#fef0c7", "#dc6803"},
	StatusFailed:   {"#fee4e2", "#d92d20"},
	StatusContext:  {"#ffffff", "#98a2b3"},
}

func colors(status string) (fill, stroke string) {
	c, ok := palette[status]
	if !ok {
		c = palette[StatusOK]
	}
	return c[0], c[1]
}

// edgeColor is the color of an edge kind.
func edgeColor(kind string) string {
	switch kind {
	case string(session.OpMerge):
		return "#7a5af8"
	case string(session.OpFork):
		return "#3e63dd"
	case string(session.OpCompress):
		return "#0e9384"
	case EdgeDetach:
		return "#98a2b3"
	default:
		return "#475467"
	}
}

// dashed reports whether an edge or node is drawn dashed.
func dashedEdge(e Edge) bool { return e.Kind == EdgeDetach || e.Ordinal > 0 }

func dashedNode(status string) bool { return status == StatusRejected || status == StatusContext }

// WriteDOT writes g as a Graphviz digraph, top to bottom.
func (g *Graph) WriteDOT(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "digraph rath {\n  label=%s;\n  labelloc=t;\n  rankdir=TB;\n", dotQuote(g.Title))
	fmt.Fprint(bw, "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n")
	fmt.Fprint(bw, "  edge [fontname=\"Helvetica\", fontsize=9];\n")
	for _, n := range g.Nodes {
		fill, stroke := colors(n.Status)
		style := "rounded,filled"
		if dashedNode(n.Status) {
			style += ",dashed"
		}
		label := n.title() + "\n" + n.detail() + "\n" + n.footer()
		fmt.Fprintf(bw, "  %s [label=%s, fillcolor=%q, color=%q, style=%q, tooltip=%s];\n",
			dotQuote(n.ID.String()), dotQuote(label), fill, stroke, style, dotQuote(n.ID.String()+" ("+n.Status+")"))
	}
	for _, e := range g.Edges {
		attrs := fmt.Sprintf("color=%q", edgeColor(e.Kind))
		if e.Kind != string(session.OpStep) && e.Kind != string(session.OpAppend) {
			attrs += ", label=" + dotQuote(e.Kind)
		}
		if dashedEdge(e) {
			attrs += ", style=dashed"
		}
		fmt.Fprintf(bw, "  %s -> %s [%s];\n", dotQuote(e.From.String()), dotQuote(e.To.String()), attrs)
	}
	fmt.Fprint(bw, "}\n")
	return bw.Flush()
}

// dotQuote quotes s as a DOT string ("\n" becomes a centered line break).
func dotQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", "")
	return `"` + r.Replace(s) + `"`
}

// WriteMermaid writes g as a Mermaid flowchart, top down.
func (g *Graph) WriteMermaid(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprint(bw, "flowchart TD\n")
	ids := make(map[session.ID]string, len(g.Nodes))
	for i, n := range g.Nodes {
		ids[n.ID] = "v" + strconv.Itoa(i)
		label := mermaidText(n.title()) + "<br/>" + mermaidText(n.detail()) + "<br/>" + mermaidText(n.footer())
		fmt.Fprintf(bw, "  %s[\"%s\"]:::%s\n", ids[n.ID], label, n.Status)
	}
	for _, e := range g.Edges {
		arrow := "-->"
		if dashedEdge(e) {
			arrow = "-.->"
		}
		if e.Kind == string(session.OpStep) || e.Kind == string(session.OpAppend) {
			fmt.Fprintf(bw, "  %s %s %s\n", ids[e.From], arrow, ids[e.To])
		} else {
			fmt.Fprintf(bw, "  %s %s|%s| %s\n", ids[e.From], arrow, mermaidText(e.Kind), ids[e.To])
		}
	}
	for _, s := range []string{StatusOutput, StatusOK, StatusHead, StatusRejected, StatusFailed, StatusContext} {
		fill, stroke := colors(s)
		dash := ""
		if dashedNode(s) {
			dash = ",stroke-dasharray:4 3"
		}
		fmt.Fprintf(bw, "  classDef %s fill:%s,stroke:%s%s\n", s, fill, stroke, dash)
	}
	return bw.Flush()
}

// mermaidText escapes s for a quoted Mermaid label.
func mermaidText(s string) string {
	r := strings.NewReplacer(`"`, "#quot;", "<", "#lt;", ">", "#gt;", "\n", " ", "|", "#124;")
	return r.Replace(s)
}
