package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// demoAgent is the demo's agent: the scripted model, so the demo needs no
// API key and prints the same transcript every time. It uses the built-in
// tools to write its plan into the step's sandbox and read it back
// (examples/agents/scribe.yaml is the same agent).
const demoAgent = `name: planner
instructions: You plan short trips and keep the plan in the workspace.
model: scripted
tools: [builtin]
script:
  - content: "I'll save the plan first."
    tool_calls:
      - function:
          name: write_workspace_file
          arguments: {path: kyoto/plan.md, content: "Day 1: Fushimi Inari at dawn, then Nishiki market.\nDay 2: Arashiyama bamboo grove.\nDay 3: Kiyomizu-dera and Gion at dusk.\n"}
  - content: "Now I'll read it back and check it."
    tool_calls:
      - function: {name: read_workspace_file, arguments: {path: kyoto/plan.md}}
      - function: {name: run_shell_command, arguments: {cmd: "grep -c '^Day' kyoto/plan.md"}}
  - content: "Day 1: Fushimi Inari at dawn, then Nishiki market. Day 2: Arashiyama bamboo grove. Day 3: Kiyomizu-dera and Gion at dusk. The plan is saved in kyoto/plan.md."
`

func newDemoCmd(env *Env) *cobra.Command {
	var graphOnly bool
	var output string
	c := &cobra.Command{
		Use:   "demo",
		Short: "start the dev stack, run a scripted agent, print the result and the session graph",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if graphOnly {
				g := session.NewMemoryGraph()
				if err := sessionDemo(ctx, g); err != nil {
					return err
				}
				if output == "json" {
					return printDemoJSON(env, nil, g.Versions())
				}
				return printTree(env.Out, g.Versions())
			}
			return runDemo(ctx, env, output)
		},
	}
	c.Flags().BoolVar(&graphOnly, "graph-only", false, "only build a session graph in memory (no stack)")
	c.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json ({run, versions}: the run and every version, as the API shows them)")
	return c
}

// runDemo starts the dev stack in a temporary directory, runs the demo
// agent through the API, then builds branches on the result and prints the
// session graph.
func runDemo(ctx context.Context, env *Env, output string) error {
	text := env
	if output == "json" {
		text = &Env{In: env.In, Out: io.Discard, Err: env.Err}
	}
	dir, err := os.MkdirTemp("", "rath-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	d, err := app.StartDev(ctx, app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", Workers: 2})
	if err != nil {
		return err
	}
	defer d.Close()
	fmt.Fprintf(text.Out, "dev stack up: coordinator %s, embedded NATS + SQLite in %s\n", d.URL, dir)
	cl, err := client.New(d.URL, "")
	if err != nil {
		return err
	}
	spec, err := agent.ParseSpec([]byte(demoAgent))
	if err != nil {
		return err
	}
	specJSON, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	var r runs.Run
	if err := cl.Do(ctx, "POST", "/v1/runs", map[string]any{"agent": json.RawMessage(specJSON), "message": "Plan a three-day trip to Kyoto."}, &r); err != nil {
		return err
	}
	if err := watchRun(ctx, text, cl, "text", r.ID); err != nil {
		return err
	}
	if err := cl.Do(ctx, "GET", "/v1/runs/"+r.ID, nil, &r); err != nil {
		return err
	}
	out, err := session.Open(ctx, d.Backend.Store, *r.Output)
	if err != nil {
		return err
	}
	chunks, err := out.Chunks(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintln(text.Out, "\ntranscript:")
	for i, c := range chunks {
		fmt.Fprintf(text.Out, "  [%d] %s\n", i, chunkLine(c))
	}
	// Branch the result, as a user exploring alternatives would.
	a, err := out.Fork(ctx)
	if err != nil {
		return err
	}
	if a, err = a.Append(ctx, session.User("Swap day 2 for Nara.")); err != nil {
		return err
	}
	b, err := out.Fork(ctx)
	if err != nil {
		return err
	}
	if b, err = b.Append(ctx, session.User("Add a tea ceremony.")); err != nil {
		return err
	}
	if _, err := a.Merge(ctx, b); err != nil {
		return err
	}
	page, err := d.Backend.Store.List(ctx, store.ListParams{Limit: store.MaxListLimit})
	if err != nil {
		return err
	}
	vs := make([]*session.Version, 0, len(page.Versions))
	for _, info := range page.Versions {
		v, err := d.Backend.Store.Get(ctx, info.ID)
		if err != nil {
			return err
		}
		vs = append(vs, v)
	}
	if output == "json" {
		return printDemoJSON(env, &r, vs)
	}
	fmt.Fprintln(env.Out, "\nsession graph:")
	return printTree(env.Out, vs)
}

// demoResult is what `rathctl demo -o json` prints: the demo's run (none
// with --graph-only) and every version it made, as the API shows them.
type demoResult struct {
	Run      *runs.Run    `json:"run,omitempty"`
	Versions []store.Info `json:"versions"`
}

func printDemoJSON(env *Env, r *runs.Run, vs []*session.Version) error {
	res := demoResult{Run: r, Versions: make([]store.Info, 0, len(vs))}
	for _, v := range vs {
		res.Versions = append(res.Versions, store.InfoOf(v))
	}
	enc := json.NewEncoder(env.Out)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// sessionDemo builds a root, forks three branches, appends to them, merges
// two and detaches one.
func sessionDemo(ctx context.Context, g session.Graph) error {
	root, err := session.FromUserMessage(ctx, g, "Plan a three-day trip to Kyoto.")
	if err != nil {
		return err
	}
	var branches [3]session.Session
	replies := []string{"Day 1: Fushimi Inari at dawn.", "Day 1: Arashiyama bamboo grove.", "Day 1: Nishiki market food tour."}
	for i := range branches {
		b, err := root.Fork(ctx)
		if err != nil {
			return err
		}
		if branches[i], err = b.Append(ctx, session.Assistant(replies[i])); err != nil {
			return err
		}
	}
	merged, err := branches[0].Merge(ctx, branches[1])
	if err != nil {
		return err
	}
	if _, err = merged.Append(ctx, session.User("Combine the best of both.")); err != nil {
		return err
	}
	_, err = branches[2].Detach(ctx)
	return err
}

// printTree prints versions as an indented tree along first parents; roots
// (creates and detaches) start at the left margin, and a merge's other
// parents are named on its line.
func printTree(w io.Writer, vs []*session.Version) error {
	children := make(map[session.ID][]*session.Version)
	var roots []*session.Version
	for _, v := range vs {
		if len(v.Parents) == 0 {
			roots = append(roots, v)
			continue
		}
		children[v.Parents[0]] = append(children[v.Parents[0]], v)
	}
	var walk func(v *session.Version, depth int) error
	walk = func(v *session.Version, depth int) error {
		line := fmt.Sprintf("%s%s  %-7s chunks=%d", strings.Repeat("  ", depth), v.ID, v.Op, v.Len)
		if v.Producer.Agent != "" {
			line += fmt.Sprintf("  agent=%s worker=%s tokens=%d", v.Producer.Agent, v.Producer.Worker, v.Usage.TotalTokens)
		}
		if len(v.Parents) > 1 {
			line += fmt.Sprintf("  +parent %s", v.Parents[1])
		}
		if v.Op == session.OpDetach && v.Base != nil {
			line += fmt.Sprintf("  (rows of %s)", *v.Base)
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
		for _, c := range children[v.ID] {
			if err := walk(c, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	for _, r := range roots {
		if err := walk(r, 0); err != nil {
			return err
		}
	}
	return nil
}

// chunkLine is a chunk in one line; tool calls and results show the tool's
// name and its arguments or JSON result.
func chunkLine(c session.Chunk) string {
	const limit = 140
	cut := func(s string) string {
		if r := []rune(s); len(r) > limit {
			return string(r[:limit]) + "…"
		}
		return s
	}
	switch {
	case c.Kind() == session.KindToolResult:
		r, _ := c.ToolResult()
		return fmt.Sprintf("tool_result %s → %s", r.Name, cut(r.Content))
	case len(c.ToolCalls()) > 0:
		var calls []string
		for _, tc := range c.ToolCalls() {
			calls = append(calls, tc.Function.Name+" "+tc.Function.Arguments)
		}
		return cut(fmt.Sprintf("assistant: %s [calls %s]", c.Text(), strings.Join(calls, "; ")))
	default:
		return c.String()
	}
}
