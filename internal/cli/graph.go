package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/internal/coordinator"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/store"
)

// lineageFlags choose where the lineage commands read, as the session
// commands do (sessionFlags, chooseTarget): a store only when --store or
// RATH_STORE names one, else a coordinator.
type lineageFlags struct{ sessionFlags }

// target is an open store or API client; exactly one is set.
type target struct {
	st       store.Store
	storeURL string
	cl       *client.Client
}

func (t target) Close() error {
	if t.st != nil {
		return t.st.Close()
	}
	return nil
}

func (f *lineageFlags) open(ctx context.Context) (target, error) {
	w, err := f.choose()
	if err != nil {
		return target{}, err
	}
	if w.storeURL == "" {
		cl, err := client.New(w.server, w.token)
		if err != nil {
			return target{}, &exitError{code: 2, err: fmt.Errorf("--server: %w", err)}
		}
		return target{cl: cl}, nil
	}
	st, err := openStoreURL(ctx, w.storeURL, false)
	if err != nil {
		return target{}, err
	}
	return target{st: st, storeURL: w.storeURL}, nil
}

func (f *lineageFlags) with(fn func(ctx context.Context, t target, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		t, err := f.open(cmd.Context())
		if err != nil {
			return err
		}
		defer t.Close()
		return fn(cmd.Context(), t, args)
	}
}

// runInfo reads a run from the run store next to the graph store.
func (t target) runInfo(ctx context.Context, id string) (lineage.RunInfo, error) {
	rs, db, err := runs.Open(ctx, t.storeURL)
	if err != nil {
		return lineage.RunInfo{}, err
	}
	defer db.Close()
	run, err := rs.Get(ctx, id)
	if err != nil {
		return lineage.RunInfo{}, fmt.Errorf("run %s: %w", id, err)
	}
	return coordinator.RunLineage(run), nil
}

func newGraphCmd(env *Env) *cobra.Command {
	var f lineageFlags
	var run, format, out string
	var depth int
	var c *cobra.Command
	c = &cobra.Command{
		Use:   "graph [ID] [--run RUN]",
		Short: "draw the Session Graph below a version, around it (--depth) or of a run (--run) as svg, dot, mermaid, json or openrath-jsonl",
		Long: "graph draws versions as boxes (op, agent, chunks, tokens; colored by status: the output, the route to it,\n" +
			"rejected and failed branches) and lineage links as arrows (fork, merge, compress, step, …).\n" +
			"The SVG is laid out in process; no Graphviz needed.",
		Args: cobra.MaximumNArgs(1),
		RunE: f.with(func(ctx context.Context, t target, args []string) error {
			fm, err := lineage.ParseFormat(format)
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("--format: %w", err)}
			}
			if f.output == "json" {
				// -o json is the graph's JSON (the API's lineage.Graph).
				if c.Flags().Changed("format") && fm != lineage.FormatJSON {
					return &exitError{code: 2, err: fmt.Errorf("-o json writes the graph as JSON: drop --format %s", fm)}
				}
				fm = lineage.FormatJSON
			}
			if (run == "") == (len(args) == 0) {
				return &exitError{code: 2, err: errors.New("give a version ID or --run RUN (one of them)")}
			}
			w := env.Out
			if out != "" && out != "-" {
				file, err := os.Create(out)
				if err != nil {
					return err
				}
				defer file.Close()
				w = file
			}
			if t.cl != nil {
				if run != "" {
					return t.cl.WriteRunGraph(ctx, run, fm, w)
				}
				id, err := parseID(args[0])
				if err != nil {
					return err
				}
				return t.cl.WriteSessionGraph(ctx, id, client.GraphOptions{Around: depth >= 0, Depth: depth}, fm, w)
			}
			var g *lineage.Graph
			switch {
			case run != "":
				info, err := t.runInfo(ctx, run)
				if err != nil {
					return err
				}
				g, err = lineage.ForRun(ctx, t.st, info)
				if err != nil {
					return err
				}
			default:
				id, err := parseID(args[0])
				if err != nil {
					return err
				}
				if depth >= 0 {
					g, err = lineage.Around(ctx, t.st, id, depth)
				} else {
					g, err = lineage.ForRoot(ctx, t.st, id, nil)
				}
				if err != nil {
					return err
				}
			}
			return g.Write(w, fm)
		}),
	}
	f.register(c)
	c.Flags().StringVar(&run, "run", "", "draw what run RUN made")
	c.Flags().StringVar(&format, "format", "svg", "svg, dot, mermaid, json or openrath-jsonl")
	c.Flags().IntVar(&depth, "depth", -1, "draw the versions up to N edges around ID (0: all its ancestors and descendants) instead of ID and its descendants")
	c.Flags().StringVar(&out, "out", "", "write to FILE instead of standard output")
	return c
}

func newBlameCmd(env *Env) *cobra.Command {
	var f lineageFlags
	c := &cobra.Command{
		Use:   "blame VERSION",
		Short: "say which version, agent, step, model, worker, tool call and workspace produced each chunk of a transcript",
		Args:  cobra.ExactArgs(1),
		RunE: f.with(func(ctx context.Context, t target, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			var b api.Blame
			if t.cl != nil {
				reply, err := t.cl.Blame(ctx, id)
				if err != nil {
					return err
				}
				b = *reply
			} else {
				b.ID = id
				if b.Chunks, err = lineage.Blame(ctx, t.st, id); err != nil {
					return err
				}
			}
			if f.output == "json" {
				b.Chunks = nonNilEntries(b.Chunks)
				return (&printer{env: env}).json(b)
			}
			return writeBlame(env.Out, b.Chunks)
		}),
	}
	f.register(c)
	return c
}

func nonNilEntries(e []lineage.Entry) []lineage.Entry {
	if e == nil {
		return []lineage.Entry{}
	}
	return e
}

func writeBlame(w io.Writer, entries []lineage.Entry) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ORD\tKIND\tVERSION\tOP\tAGENT\tSTEP\tTOOL\tWORKSPACE\tTEXT")
	for _, e := range entries {
		tool := e.Tool
		if e.CallID != "" {
			tool += "#" + e.CallID
		}
		ver := e.Version.String()
		if len(e.Via) > 0 {
			ver += " (via merge)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Ord, e.Kind, ver, e.Op, dash(e.Agent), dash(e.Step),
			dash(tool), dash(e.Snapshot), lineage.Preview(e.Text, 60))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newDiffCmd(env *Env) *cobra.Command {
	var f lineageFlags
	c := &cobra.Command{
		Use:   "diff A B",
		Short: "compare two versions' transcripts (common prefix, chunks only in each) and workspaces (see also session diff)",
		Args:  cobra.ExactArgs(2),
		RunE: f.with(func(ctx context.Context, t target, args []string) error {
			a, err := parseID(args[0])
			if err != nil {
				return err
			}
			b, err := parseID(args[1])
			if err != nil {
				return err
			}
			// Through a coordinator the diff is computed here, reading
			// the versions with the client's typed Graph (a lineage.Source).
			var src lineage.Source = t.st
			if t.cl != nil {
				src = t.cl.Graph()
			}
			d, err := lineage.Diff(ctx, src, a, b)
			if err != nil {
				return err
			}
			if f.output == "json" {
				return (&printer{env: env}).json(d)
			}
			w := env.Out
			fmt.Fprintf(w, "common prefix: %d chunks", d.CommonPrefix)
			if d.CommonAncestor != nil {
				fmt.Fprintf(w, "; common ancestor %s", d.CommonAncestor)
			}
			fmt.Fprintln(w)
			for _, side := range []struct {
				name string
				cs   []lineage.Change
			}{{"-", d.OnlyA}, {"+", d.OnlyB}} {
				for _, c := range side.cs {
					fmt.Fprintf(w, "%s %d %s: %s\n", side.name, c.Ord, c.Kind, lineage.Preview(c.Text, 100))
				}
			}
			if d.SameWorkspace {
				_, err = fmt.Fprintf(w, "workspace: same (%s)\n", dash(d.SnapshotA))
			} else {
				_, err = fmt.Fprintf(w, "workspace: %s -> %s (rathctl session diff %s %s lists the files)\n",
					dash(d.SnapshotA), dash(d.SnapshotB), a, b)
			}
			return err
		}),
	}
	f.register(c)
	return c
}

// lineageCmds are the top-level lineage commands.
func lineageCmds(env *Env) []*cobra.Command {
	cmds := []*cobra.Command{newGraphCmd(env), newBlameCmd(env), newDiffCmd(env), newVerifyCmd(env), newDossierCmd(env), newGCCmd(env), newReplayCmd(env)}
	return append(cmds, newPinCmds(env)...)
}
