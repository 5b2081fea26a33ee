package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/openrath"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// devStore is the store `rathctl dev` keeps in its default state
// directory. No other command opens it unless --store or RATH_STORE names
// it (target.go).
const devStore = "sqlite:.rath/rath.db"

// storeFlags are the flags of a command that reads or writes the graph
// directly: --store (default $RATH_STORE) and -o.
type storeFlags struct {
	url    string
	output string
	// create lets the store be a new SQLite file (rathctl migrate only).
	create bool
}

func (f *storeFlags) register(c *cobra.Command) {
	c.PersistentFlags().StringVar(&f.url, "store", "", "work on this store directly: postgres://… or sqlite:PATH (default $RATH_STORE; rathctl dev's is "+devStore+")")
	c.PersistentFlags().StringVarP(&f.output, "output", "o", "text", "output format: text or json")
}

// open opens and migrates the store --store or RATH_STORE names; with
// neither it is a usage error (there is no default store).
func (f *storeFlags) open(ctx context.Context) (store.Store, error) {
	u, err := storeURLFrom(f.url)
	if err != nil {
		return nil, err
	}
	return openStoreURL(ctx, u, f.create)
}

// withStore wraps a command body that needs an open store.
func (f *storeFlags) withStore(fn func(ctx context.Context, st store.Store, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		st, err := f.open(cmd.Context())
		if err != nil {
			return err
		}
		defer st.Close()
		return fn(cmd.Context(), st, args)
	}
}

func parseID(s string) (session.ID, error) {
	id, err := session.ParseID(s)
	if err != nil {
		return id, &exitError{code: 2, err: err}
	}
	return id, nil
}

func newMigrateCmd(env *Env) *cobra.Command {
	f := storeFlags{create: true}
	c := &cobra.Command{
		Use:   "migrate",
		Short: "apply the embedded schema migrations to the store --store or RATH_STORE names, creating a SQLite file that does not exist yet (safe to run twice or concurrently)",
		Args:  cobra.NoArgs,
		RunE: f.withStore(func(ctx context.Context, st store.Store, _ []string) error {
			if f.output == "json" {
				return json.NewEncoder(env.Out).Encode(map[string]bool{"migrated": true})
			}
			_, err := fmt.Fprintln(env.Out, "migrated")
			return err
		}),
	}
	f.register(c)
	return c
}

func newSessionCmd(env *Env) *cobra.Command {
	var f sessionFlags
	c := &cobra.Command{
		Use:   "session",
		Short: "read and write the Session Graph: through a coordinator (--server) or directly in a store (--store)",
	}
	f.register(c)
	p := &printer{env: env, f: &f.storeFlags}

	var sys, user, assistant string
	newCmd := &cobra.Command{
		Use:   "new",
		Short: "create a session from a system and/or user message",
		Args:  cobra.NoArgs,
		RunE: f.with(func(ctx context.Context, g sessionGraph, _ []string) error {
			var chunks []session.Chunk
			if sys != "" {
				chunks = append(chunks, session.System(sys))
			}
			if user != "" {
				chunks = append(chunks, session.User(user))
			}
			if len(chunks) == 0 {
				return &exitError{code: 2, err: errors.New("session new needs --user TEXT or --system TEXT")}
			}
			return p.version(g.New(ctx, chunks))
		}),
	}
	newCmd.Flags().StringVar(&sys, "system", "", "system message")
	newCmd.Flags().StringVar(&user, "user", "", "user message")

	appendCmd := &cobra.Command{
		Use:   "append ID",
		Short: "append a user or assistant message to a session version",
		Args:  cobra.ExactArgs(1),
		RunE: f.with(func(ctx context.Context, g sessionGraph, args []string) error {
			var chunks []session.Chunk
			if user != "" {
				chunks = append(chunks, session.User(user))
			}
			if assistant != "" {
				chunks = append(chunks, session.Assistant(assistant))
			}
			if len(chunks) == 0 {
				return &exitError{code: 2, err: errors.New("session append needs --user TEXT or --assistant TEXT")}
			}
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			return p.version(g.Append(ctx, id, chunks))
		}),
	}
	appendCmd.Flags().StringVar(&user, "user", "", "user message")
	appendCmd.Flags().StringVar(&assistant, "assistant", "", "assistant message")

	var short bool
	showCmd := &cobra.Command{
		Use:   "show ID",
		Short: "print a version and its full transcript (--short: one cut line per chunk)",
		Args:  cobra.ExactArgs(1),
		RunE: f.with(func(ctx context.Context, g sessionGraph, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			in, chunks, err := g.Show(ctx, id)
			if err != nil {
				return err
			}
			return p.show(in, chunks, short)
		}),
	}
	showCmd.Flags().BoolVar(&short, "short", false, "one line per chunk, cut at 120 characters")

	var depth int
	logCmd := &cobra.Command{
		Use:   "log ID",
		Short: "print a version's lineage ancestors, nearest first",
		Args:  cobra.ExactArgs(1),
		RunE: f.with(func(ctx context.Context, g sessionGraph, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			anc, err := g.Ancestors(ctx, id, depth)
			if err != nil {
				return err
			}
			return p.relatives(anc)
		}),
	}
	logCmd.Flags().IntVar(&depth, "depth", 0, "stop this many edges away (0: no limit)")

	unary := func(use, short string, op func(sessionGraph, context.Context, session.ID) (api.Version, error)) *cobra.Command {
		return &cobra.Command{
			Use:   use + " ID",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: f.with(func(ctx context.Context, g sessionGraph, args []string) error {
				id, err := parseID(args[0])
				if err != nil {
					return err
				}
				return p.version(op(g, ctx, id))
			}),
		}
	}
	forkCmd := unary("fork", "fork a version (one small row, whatever its length)", sessionGraph.Fork)
	detachCmd := unary("detach", "start a new root with a version's transcript", sessionGraph.Detach)

	mergeCmd := &cobra.Command{
		Use:   "merge A B",
		Short: "merge B's new chunks into A (both become parents)",
		Args:  cobra.ExactArgs(2),
		RunE: f.with(func(ctx context.Context, g sessionGraph, args []string) error {
			a, err := parseID(args[0])
			if err != nil {
				return err
			}
			b, err := parseID(args[1])
			if err != nil {
				return err
			}
			return p.version(g.Merge(ctx, a, b))
		}),
	}

	var place session.Placement
	placeCmd := &cobra.Command{
		Use:   "place ID",
		Short: "record a version whose tools run on another sandbox (op place): --backend docker [--image I] [--network none|egress]",
		Args:  cobra.ExactArgs(1),
		RunE: f.with(func(ctx context.Context, g sessionGraph, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			if err := validPlacement(place); err != nil {
				return &exitError{code: 2, err: err}
			}
			return p.version(g.Place(ctx, id, place))
		}),
	}
	placeCmd.Flags().StringVar(&place.Backend, "backend", "", "sandbox backend: local or docker (required)")
	placeCmd.Flags().StringVar(&place.Spec.Image, "image", "", "docker image (default: the operator's)")
	placeCmd.Flags().StringVar(&place.Spec.Network, "network", "", "none (default) or egress")

	var lp store.ListParams
	listCmd := &cobra.Command{
		Use:   "list",
		Short: "list versions in commit order (--roots: sessions only)",
		Args:  cobra.NoArgs,
		RunE: f.with(func(ctx context.Context, g sessionGraph, _ []string) error {
			page, err := g.List(ctx, lp)
			if err != nil {
				return err
			}
			return p.page(page)
		}),
	}
	listCmd.Flags().BoolVar(&lp.RootsOnly, "roots", false, "only versions without parents")
	listCmd.Flags().IntVar(&lp.Limit, "limit", store.DefaultListLimit, "page size")
	listCmd.Flags().StringVar(&lp.After, "after", "", "cursor from the previous page")
	listCmd.Flags().StringVar(&lp.Run, "run", "", "only versions produced by this run")

	var exportFormat string
	exportCmd := &cobra.Command{
		Use:   "export ID",
		Short: "write a version and its ancestry as session JSONL (--format openrath: its transcript as an OpenRath transcript) to stdout",
		Args:  cobra.ExactArgs(1),
		RunE: f.with(func(ctx context.Context, g sessionGraph, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			switch exportFormat {
			case "rath":
				return g.Export(ctx, id, env.Out)
			case "openrath":
				return exportOpenRath(ctx, g, id, env.Out)
			}
			return &exitError{code: 2, err: fmt.Errorf("--format must be rath or openrath, not %q", exportFormat)}
		}),
	}
	exportCmd.Flags().StringVar(&exportFormat, "format", "rath", "rath (session JSONL) or openrath (an OpenRath persisted transcript)")
	var importFormat string
	importCmd := &cobra.Command{
		Use: "import FILE",
		Short: "import Rath session JSONL, an OpenRath transcript, a directory of them or OpenRath lineage JSONL " +
			"(FILE, or - for stdin) and print what was imported",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := openrath.ParseFormat(importFormat)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			return f.with(func(ctx context.Context, g sessionGraph, args []string) error {
				return importAny(ctx, env, p, g, args[0], format)
			})(cmd, args)
		},
	}
	importCmd.Flags().StringVar(&importFormat, "format", "auto",
		"auto (detect from the first record), rath, openrath-transcript or openrath-lineage")
	c.AddCommand(newCmd, appendCmd, showCmd, logCmd, forkCmd, detachCmd, mergeCmd, placeCmd, listCmd, exportCmd, importCmd)
	c.AddCommand(newSessionFilesCmds(p, &f)...)
	return c
}

// printer writes results as text or JSON.
type printer struct {
	env *Env
	f   *storeFlags
}

func (p *printer) json(v any) error {
	enc := json.NewEncoder(p.env.Out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func infoLine(in store.Info) string {
	line := fmt.Sprintf("%s  %-7s len=%d", in.ID, in.Op, in.Len)
	if len(in.Parents) > 0 {
		ps := make([]string, len(in.Parents))
		for i, id := range in.Parents {
			ps[i] = id.String()
		}
		line += "  parents=" + strings.Join(ps, ",")
	}
	if in.Usage.TotalTokens > 0 {
		line += fmt.Sprintf("  tokens=%d", in.Usage.TotalTokens)
	}
	return line
}

// version prints the version an operation returned (JSON: the API's
// api.Version), or its error.
func (p *printer) version(v api.Version, err error) error {
	if err != nil {
		return err
	}
	if p.f.output == "json" {
		return p.json(v)
	}
	_, err = fmt.Fprintln(p.env.Out, infoLine(v.Info))
	return err
}

// show prints a version and its full transcript: in JSON, the API's
// version (GET /v1/sessions/{id}) and the chunks of its transcript (GET
// …/transcript).
func (p *printer) show(v api.Version, chunks []session.Chunk, short bool) error {
	if p.f.output == "json" {
		if chunks == nil {
			chunks = []session.Chunk{}
		}
		return p.json(struct {
			Version    api.Version     `json:"version"`
			Transcript []session.Chunk `json:"transcript"`
		}{v, chunks})
	}
	if _, err := fmt.Fprintln(p.env.Out, infoLine(v.Info)); err != nil {
		return err
	}
	for i, c := range chunks {
		line := c.String()
		if !short {
			line = fullChunk(c)
		}
		if _, err := fmt.Fprintf(p.env.Out, "%4d  %s\n", i, line); err != nil {
			return err
		}
	}
	return nil
}

// fullChunk renders a chunk whole for `session show`: its kind, its text,
// each tool call with its arguments, a tool result's name and content.
// Lines after the first are indented under the text.
func fullChunk(c session.Chunk) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: ", c.Kind())
	if c.Kind() == session.KindToolResult && !c.Redacted() {
		if r, ok := c.ToolResult(); ok {
			fmt.Fprintf(&b, "%s (%s) → %s", r.Name, r.ToolCallID, r.Content)
			return indent(b.String())
		}
	}
	b.WriteString(c.Text())
	for _, tc := range c.ToolCalls() {
		fmt.Fprintf(&b, "\ncall %s %s(%s)", tc.ID, tc.Function.Name, tc.Function.Arguments)
	}
	return indent(b.String())
}

func indent(s string) string { return strings.ReplaceAll(s, "\n", "\n      ") }

func (p *printer) relatives(rel api.Relatives) error {
	if p.f.output == "json" {
		if rel.Versions == nil {
			rel.Versions = []store.Relative{}
		}
		return p.json(rel)
	}
	for _, r := range rel.Versions {
		if _, err := fmt.Fprintf(p.env.Out, "%4d  %s  %-7s len=%d\n", r.Depth, r.ID, r.Op, r.Len); err != nil {
			return err
		}
	}
	return nil
}

func (p *printer) page(pg api.SessionList) error {
	if p.f.output == "json" {
		if pg.Versions == nil {
			pg.Versions = []store.Info{}
		}
		return p.json(pg)
	}
	for _, in := range pg.Versions {
		if _, err := fmt.Fprintln(p.env.Out, infoLine(in)); err != nil {
			return err
		}
	}
	if pg.Next != "" {
		_, err := fmt.Fprintf(p.env.Out, "next page: --after %s\n", pg.Next)
		return err
	}
	return nil
}
