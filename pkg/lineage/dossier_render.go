package lineage

import (
	"bufio"
	"fmt"
	"html/template"
	"io"
	"strings"
)

// WriteMarkdown writes the dossier as Markdown; the graph is embedded as
// an inline SVG block (GitHub and most viewers render it) and the route is
// also drawn as a Mermaid chart.
func (d *Dossier) WriteMarkdown(w io.Writer) error {
	bw := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	p("# Evidence dossier: run %s\n\n", d.Run.ID)
	p("- status: %s\n", dashIfEmpty(d.Status))
	if d.Error != "" {
		p("- error: %s\n", oneLine(d.Error))
	}
	if d.Run.Input != nil {
		p("- input: `%s`\n", d.Run.Input)
	}
	if d.Output != nil {
		p("- output: `%s`\n", d.Output.Version)
	}
	p("\n## Graph\n\n")
	var mer strings.Builder
	if err := d.Graph.WriteMermaid(&mer); err != nil {
		return err
	}
	p("```mermaid\n%s```\n\n", mer.String())
	svg, err := d.svg()
	if err != nil {
		return err
	}
	p("<details><summary>SVG</summary>\n\n%s\n</details>\n\n", svg)

	p("## Route taken\n\n")
	if len(d.Route) == 0 {
		p("No output: the run did not succeed.\n\n")
	}
	for i, n := range d.Route {
		p("%d. `%s` %s%s — %s\n", i+1, n.ID, n.Op, who(n), n.detail())
	}
	p("\n### Branches rejected\n\n")
	if len(d.Rejected) == 0 {
		p("None.\n")
	}
	for _, n := range d.Rejected {
		p("- `%s` %s%s (%s) — %s\n", n.ID, n.Op, who(n), n.Status, n.detail())
	}
	p("\n### Selector decisions\n\n")
	if len(d.Decisions) == 0 {
		p("None.\n")
	}
	for _, dec := range d.Decisions {
		p("- `%s` %s chose **%s**\n\n```json\n%s\n```\n", dec.Version, dashIfEmpty(dec.Agent), dashIfEmpty(dec.Choice), pretty(dec.Body))
	}

	p("\n## Tool calls\n\n")
	if len(d.ToolCalls) == 0 {
		p("None.\n")
	}
	for _, tc := range d.ToolCalls {
		p("### %s `%s` (%s, version `%s`, sandbox %s %s)\n\nArguments:\n\n```json\n%s\n```\n\nResult:\n\n```\n%s\n```\n\n",
			tc.Tool, tc.CallID, dashIfEmpty(tc.Agent), tc.Version, dashIfEmpty(tc.Backend), dashIfEmpty(tc.Snapshot),
			prettyText(tc.Arguments), dashIfEmpty(prettyText(tc.Result)))
	}
	p("\n## Workspace changes\n\n")
	if len(d.Workspace) == 0 {
		p("None.\n")
	} else {
		p("| version | agent | before | after |\n| --- | --- | --- | --- |\n")
	}
	for _, ws := range d.Workspace {
		p("| `%s` | %s | %s | %s |\n", ws.Version, dashIfEmpty(ws.Agent), dashIfEmpty(ws.Before), dashIfEmpty(ws.After))
	}
	p("\n## Memory\n\n### Read\n\n")
	if len(d.MemoryRead) == 0 {
		p("None.\n")
	}
	for _, m := range d.MemoryRead {
		p("- `%s` %s\n\n```json\n%s\n```\n", m.Version, dashIfEmpty(m.Agent), pretty(m.Body))
	}
	p("\n### Written\n\n")
	if len(d.MemoryWritten) == 0 {
		p("None.\n")
	}
	for _, m := range d.MemoryWritten {
		verb := "wrote"
		if m.Deleted {
			verb = "deleted"
		}
		p("- `%s` %s %s/%s: %s\n", m.Version, verb, m.Namespace, m.URI, oneLine(m.Text))
	}
	if len(d.Resumes) > 0 {
		p("\n## Resumes\n\n")
		for _, r := range d.Resumes {
			p("- step `%s` resumed after round %d on worker %s (recorded by %s)\n", r.Step, r.AfterRound, r.Worker, dashIfEmpty(r.FromWorker))
		}
	}
	p("\n## Approvals\n\n")
	if len(d.Approvals) == 0 {
		p("None.\n")
	}
	for _, a := range d.Approvals {
		p("- `%s` %s\n\n```json\n%s\n```\n", a.Version, dashIfEmpty(a.Agent), pretty(a.Body))
	}
	p("\n## Usage and cost\n\n| agent | model | branch | steps | prompt | completion | total | cost (USD) |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, u := range d.Usage {
		p("| %s | %s | %s | %d | %d | %d | %d | %.6f |\n", dashIfEmpty(u.Agent), dashIfEmpty(u.Model), branchName(u.Branch), u.Steps,
			u.PromptTokens, u.CompletionTokens, u.TotalTokens, u.CostUSD)
	}
	p("\n## Final output\n\n")
	if d.Output == nil {
		p("None.\n")
	} else {
		p("Version `%s` (%d chunks):\n\n> %s\n", d.Output.Version, d.Output.Len, strings.ReplaceAll(d.Output.Answer, "\n", "\n> "))
	}
	p("\n## Anchor\n\n")
	if d.Output != nil {
		p("Output hash: `%s`\n\n%s\n", d.Output.Hash, d.verifiedLine())
	} else {
		p("No output to anchor.\n")
	}
	return bw.Flush()
}

func (d *Dossier) verifiedLine() string {
	if d.Verified == nil {
		return "Not verified."
	}
	if len(d.Verified.Problems) == 0 {
		return fmt.Sprintf("The hash chain verifies: %d versions and %d chunks recomputed from the stored rows.", d.Verified.Versions, d.Verified.Chunks)
	}
	return fmt.Sprintf("The hash chain DOES NOT verify: %d problem(s), first: %s", len(d.Verified.Problems), d.Verified.Problems[0])
}

func who(n Node) string {
	if n.Agent != "" {
		return " by " + n.Agent
	}
	return ""
}

func branchName(b string) string {
	if b == "" {
		return "trunk"
	}
	return "fork …" + b[len(b)-8:]
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// WriteHTML writes the dossier as one self-contained HTML page: inline CSS
// and SVG, no scripts, nothing fetched from the network. Every value is
// escaped by html/template.
func (d *Dossier) WriteHTML(w io.Writer) error {
	svg, err := d.svg()
	if err != nil {
		return err
	}
	return dossierHTML.Execute(w, struct {
		*Dossier
		// SVG is produced by WriteSVG, which escapes every value it writes.
		SVG      template.HTML
		Verified string
	}{d, template.HTML(svg), d.verifiedLine()}) //nolint:gosec // the SVG is built here with every text escaped
}

var dossierHTML = template.Must(template.New("dossier").Funcs(template.FuncMap{
	"pretty": pretty, "prettyText": prettyText, "dash": dashIfEmpty, "branch": branchName, "who": who,
	"detail": func(n Node) string { return n.detail() }, "inc": func(i int) int { return i + 1 },
	"cost": func(f float64) string { return fmt.Sprintf("%.6f", f) },
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<title>Evidence dossier: run {{.Run.ID}}</title>
<style>
body{font:14px/1.5 -apple-system,'Segoe UI',Helvetica,Arial,sans-serif;color:#101828;max-width:1100px;margin:2em auto;padding:0 1.5em}
h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:1px solid #eaecf0;padding-bottom:.2em;margin-top:1.8em}
code,pre{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px}
pre{background:#f9fafb;border:1px solid #eaecf0;border-radius:6px;padding:.7em;overflow:auto;white-space:pre-wrap}
table{border-collapse:collapse;width:100%}th,td{border:1px solid #eaecf0;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f2f4f7}.graph{overflow:auto;border:1px solid #eaecf0;border-radius:6px}
.ok{color:#039855}.bad{color:#d92d20;font-weight:600}.muted{color:#667085}
blockquote{border-left:4px solid #039855;margin:0;padding:.3em 1em;background:#f6fef9}
</style></head><body>
<h1>Evidence dossier: run {{.Run.ID}}</h1>
<section id="summary"><p>Status <b>{{dash .Status}}</b>{{with .Error}} — {{.}}{{end}}.
{{with .Run.Input}}Input <code>{{.}}</code>.{{end}} {{with .Output}}Output <code>{{.Version}}</code>.{{end}}</p></section>

<section id="graph"><h2>Graph</h2><div class="graph">{{.SVG}}</div></section>

<section id="route"><h2>Route taken</h2>
{{if .Route}}<ol>{{range .Route}}<li><code>{{.ID}}</code> {{.Op}}{{who .}} — {{detail .}}</li>{{end}}</ol>
{{else}}<p class="muted">No output: the run did not succeed.</p>{{end}}
<h3>Branches rejected</h3>
{{if .Rejected}}<ul>{{range .Rejected}}<li><code>{{.ID}}</code> {{.Op}}{{who .}} ({{.Status}}) — {{detail .}}</li>{{end}}</ul>
{{else}}<p class="muted">None.</p>{{end}}
<h3>Selector decisions</h3>
{{range .Decisions}}<p><code>{{.Version}}</code> {{dash .Agent}} chose <b>{{dash .Choice}}</b></p><pre>{{pretty .Body}}</pre>
{{else}}<p class="muted">None.</p>{{end}}</section>

<section id="tools"><h2>Tool calls</h2>
{{range .ToolCalls}}<h3>{{.Tool}} <code>{{.CallID}}</code></h3>
<p>{{dash .Agent}}, version <code>{{.Version}}</code>, sandbox {{dash .Backend}} <code>{{dash .Snapshot}}</code></p>
<p>Arguments</p><pre>{{prettyText .Arguments}}</pre><p>Result</p><pre>{{dash (prettyText .Result)}}</pre>
{{else}}<p class="muted">None.</p>{{end}}</section>

<section id="workspace"><h2>Workspace changes</h2>
{{if .Workspace}}<table><tr><th>version</th><th>agent</th><th>before</th><th>after</th></tr>
{{range .Workspace}}<tr><td><code>{{.Version}}</code></td><td>{{dash .Agent}}</td><td><code>{{dash .Before}}</code></td><td><code>{{dash .After}}</code></td></tr>{{end}}
</table>{{else}}<p class="muted">None.</p>{{end}}</section>

<section id="memory"><h2>Memory</h2><h3>Read</h3>
{{range .MemoryRead}}<p><code>{{.Version}}</code> {{dash .Agent}}</p><pre>{{pretty .Body}}</pre>{{else}}<p class="muted">None.</p>{{end}}
<h3>Written</h3>
{{if .MemoryWritten}}<ul>{{range .MemoryWritten}}<li><code>{{.Version}}</code> {{if .Deleted}}deleted{{else}}wrote{{end}} {{.Namespace}}/{{.URI}}: {{.Text}}</li>{{end}}</ul>
{{else}}<p class="muted">None.</p>{{end}}</section>

<section id="approvals"><h2>Approvals</h2>
{{range .Approvals}}<p><code>{{.Version}}</code> {{dash .Agent}}</p><pre>{{pretty .Body}}</pre>{{else}}<p class="muted">None.</p>{{end}}</section>

<section id="usage"><h2>Usage and cost</h2>
<table><tr><th>agent</th><th>model</th><th>branch</th><th>steps</th><th>prompt</th><th>completion</th><th>total</th><th>cost (USD)</th></tr>
{{range .Usage}}<tr><td>{{dash .Agent}}</td><td>{{dash .Model}}</td><td>{{branch .Branch}}</td><td>{{.Steps}}</td><td>{{.PromptTokens}}</td><td>{{.CompletionTokens}}</td><td>{{.TotalTokens}}</td><td>{{cost .CostUSD}}</td></tr>{{end}}
</table></section>

<section id="output"><h2>Final output</h2>
{{with .Output}}<p>Version <code>{{.Version}}</code> ({{.Len}} chunks)</p><blockquote>{{.Answer}}</blockquote>{{else}}<p class="muted">None.</p>{{end}}</section>

<section id="anchor"><h2>Anchor</h2>
{{with .Output}}<p>Output hash <code>{{.Hash}}</code></p>{{end}}
<p class="{{if and .Dossier.Verified (not .Dossier.Verified.Problems)}}ok{{else}}bad{{end}}">{{.Verified}}</p></section>
</body></html>
`))
