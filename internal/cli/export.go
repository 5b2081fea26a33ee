package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/trainset"
)

func newExportCmd(env *Env) *cobra.Command {
	c := &cobra.Command{
		Use:   "export",
		Short: "export the Session Graph as training data (docs/training-data.md)",
	}
	c.AddCommand(newExportTrajectoriesCmd(env), newExportPairsCmd(env))
	return c
}

func newExportPairsCmd(env *Env) *cobra.Command {
	var f exportFlags
	c := &cobra.Command{
		Use:   "pairs",
		Short: "write DPO preference pairs {prompt, chosen, rejected} from labeled sibling branches, with both versions' provenance",
		Long: "export pairs finds the trajectory ends the selection keeps (as export trajectories does) that something judged,\n" +
			"and writes one pair for every two of them that share a prompt (their nearest common base holds a user message) and\n" +
			"that a source of --from ranks apart: labels (rathctl label: a preference beats none, then the higher score), scores\n" +
			"(a rollout verifier's: the higher wins), approval (a branch whose tool calls were approved over one with a rejected\n" +
			"call), selector (the branch a rollout's selector chose over the others). Each pair's provenance.source names its\n" +
			"source. Records go to stdout (or --out FILE), counts to stderr.",
		Args: cobra.NoArgs,
		RunE: f.with(func(ctx context.Context, t target, _ []string) error {
			return f.pairs(ctx, env, t)
		}),
	}
	f.register(c)
	f.selection(c, "pair")
	c.Flags().StringSliceVar(&f.from, "from", nil, "the decisions that rank branches: labels, scores, approval, selector (comma-separated; default all)")
	return c
}

func (f *exportFlags) pairs(ctx context.Context, env *Env, t target) (err error) {
	f.format = "openai"
	req, err := f.request()
	if err != nil {
		return err
	}
	from, err := trainset.ParsePairSources(f.from)
	if err != nil {
		return &exitError{code: 2, err: fmt.Errorf("--from: %w", err)}
	}
	w, done, err := f.sink(env)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, done()) }()
	var stats trainset.PairStats
	if t.cl != nil {
		stats, err = t.cl.ExportPairs(ctx, api.ExportPairsRequest{Run: req.Run, Agent: req.Agent, Since: req.Since, Until: req.Until,
			Redacted: req.Redacted, From: f.from}, w, nil)
	} else {
		sel := trainset.Selector{Run: req.Run, Agent: req.Agent, Since: req.Since, Until: req.Until}
		stats, err = trainset.Pairs(ctx, t.st, sel, trainset.PairOptions{Redacted: trainset.Redacted(req.Redacted), From: from}, w)
	}
	if err != nil {
		return err
	}
	if f.output == "json" {
		b, merr := json.Marshal(stats)
		if merr != nil {
			return merr
		}
		fmt.Fprintln(env.Err, string(b))
		return nil
	}
	if !f.quiet {
		fmt.Fprintf(env.Err, "exported %d pairs from %d labeled trajectory ends (%d versions scanned, %d candidate pairs skipped)\n",
			stats.Written, stats.Labeled, stats.Scanned, stats.Skipped)
	}
	return nil
}

// sink is where records go: --out FILE, else stdout.
func (f *exportFlags) sink(env *Env) (io.Writer, func() error, error) {
	if f.out == "" {
		return env.Out, func() error { return nil }, nil
	}
	file, err := os.Create(f.out)
	if err != nil {
		return nil, nil, fmt.Errorf("--out: %w", err)
	}
	return file, file.Close, nil
}

type exportFlags struct {
	lineageFlags
	run, agent, since, until string
	format, redacted, after  string
	tools, out, where        string
	from                     []string
	quiet                    bool
}

func newExportTrajectoriesCmd(env *Env) *cobra.Command {
	var f exportFlags
	c := &cobra.Command{
		Use:   "trajectories",
		Short: "write one JSONL record per trajectory (OpenAI fine-tuning chat format or OpenRath's), each with its provenance",
		Long: "export trajectories selects versions by --run, --agent and creation time (--since, --until, RFC 3339) and writes\n" +
			"one record per trajectory end: a selected version no selected child extends. Records go to stdout (or --out FILE),\n" +
			"progress to stderr. Redacted chunks are never exported: --redacted drop-record (default) skips the record,\n" +
			"drop-chunk drops the chunk and the tool call it answered. Every record's provenance.cursor resumes the export\n" +
			"after it (--after CURSOR). Memory stays flat however many versions are exported.",
		Args: cobra.NoArgs,
		RunE: f.with(func(ctx context.Context, t target, _ []string) error {
			return f.export(ctx, env, t)
		}),
	}
	f.register(c)
	f.selection(c, "record")
	fl := c.Flags()
	fl.StringVar(&f.format, "format", "openai", "record format: openai or openrath")
	fl.StringVar(&f.after, "after", "", "resume after the record with this provenance cursor")
	fl.StringVar(&f.where, "where", "", "store only: a SQL boolean expression over versions v and the lineage views that every exported end must satisfy")
	fl.StringVar(&f.tools, "tools", "", "a JSON file holding the OpenAI tool schemas to write into every record (an array)")
	return c
}

// selection registers the flags both exports share: which versions, what
// a redacted chunk drops (its item: a record or a pair), where items go.
func (f *exportFlags) selection(c *cobra.Command, item string) {
	fl := c.Flags()
	fl.StringVar(&f.run, "run", "", "only versions this run produced")
	fl.StringVar(&f.agent, "agent", "", "only versions this agent produced")
	fl.StringVar(&f.since, "since", "", "only versions created at or after this time (RFC 3339)")
	fl.StringVar(&f.until, "until", "", "only versions created before this time (RFC 3339)")
	fl.StringVar(&f.redacted, "redacted", "drop-record", "a redacted chunk drops its "+item+" (drop-record) or itself (drop-chunk)")
	fl.StringVar(&f.out, "out", "", "write the "+item+"s to this file (default stdout)")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress on stderr")
}

func (f *exportFlags) request() (api.ExportTrajectoriesRequest, error) {
	req := api.ExportTrajectoriesRequest{Run: f.run, Agent: f.agent, Format: f.format, Redacted: f.redacted, After: f.after}
	usage := func(err error) error { return &exitError{code: 2, err: err} }
	if _, err := trainset.ParseFormat(f.format); err != nil {
		return req, usage(fmt.Errorf("--format: %w", err))
	}
	if _, err := trainset.ParseRedacted(f.redacted); err != nil {
		return req, usage(fmt.Errorf("--redacted: %w", err))
	}
	if f.after != "" {
		if _, _, err := trainset.DecodeCursor(f.after); err != nil {
			return req, usage(fmt.Errorf("--after: %w", err))
		}
	}
	for _, tf := range []struct {
		name, v string
		into    *time.Time
	}{{"--since", f.since, &req.Since}, {"--until", f.until, &req.Until}} {
		if tf.v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, tf.v)
		if err != nil {
			return req, usage(fmt.Errorf("%s %q: want an RFC 3339 time such as 2026-11-26T10:00:00Z", tf.name, tf.v))
		}
		*tf.into = t
	}
	if f.tools != "" {
		raw, err := os.ReadFile(f.tools)
		if err != nil {
			return req, fmt.Errorf("--tools: %w", err)
		}
		if err := json.Unmarshal(raw, &req.Tools); err != nil {
			return req, usage(fmt.Errorf("--tools %s: want a JSON array of tool schemas: %w", f.tools, err))
		}
	}
	return req, nil
}

func (f *exportFlags) export(ctx context.Context, env *Env, t target) (err error) {
	req, err := f.request()
	if err != nil {
		return err
	}
	w, done, err := f.sink(env)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, done()) }()
	start := time.Now()
	var stats trainset.Stats
	if t.cl != nil && f.where != "" {
		return &exitError{code: 2, err: errors.New("--where runs SQL on a store opened directly (--store): a coordinator takes no SQL")}
	}
	if t.cl != nil {
		progress := func(n int) {
			if !f.quiet {
				fmt.Fprintf(env.Err, "\rexport: %d records", n)
			}
		}
		stats, err = t.cl.ExportTrajectories(ctx, req, w, progress)
	} else {
		var filter trainset.Filter
		if f.where != "" {
			var closeFilter func() error
			if filter, closeFilter, err = f.sqlFilter(ctx, t.storeURL); err != nil {
				return err
			}
			defer func() { err = errors.Join(err, closeFilter()) }()
		}
		sel := trainset.Selector{Run: req.Run, Agent: req.Agent, Since: req.Since, Until: req.Until}
		stats, err = trainset.Export(ctx, t.st, sel, trainset.Options{
			Format: trainset.Format(req.Format), Redacted: trainset.Redacted(req.Redacted),
			Tools: req.Tools, After: req.After, Filter: filter,
			Progress: func(s trainset.Stats) {
				if !f.quiet {
					fmt.Fprintf(env.Err, "\rexport: %d versions scanned, %d records", s.Scanned, s.Written)
				}
			},
		}, w)
	}
	if !f.quiet {
		fmt.Fprintln(env.Err)
	}
	if err != nil {
		return err
	}
	if f.output == "json" {
		b, merr := json.Marshal(stats)
		if merr != nil {
			return merr
		}
		fmt.Fprintln(env.Err, string(b))
		return nil
	}
	fmt.Fprintf(env.Err, "exported %d records (%d skipped: no assistant reply last, %d dropped for a redaction) in %s\n",
		stats.Written, stats.Skipped, stats.Redacted, time.Since(start).Round(time.Millisecond))
	return nil
}

// sqlFilter opens the store's database for a --where filter.
func (f *exportFlags) sqlFilter(ctx context.Context, storeURL string) (trainset.Filter, func() error, error) {
	dialect, err := lineage.DialectOf(storeURL)
	if err != nil {
		return nil, nil, err
	}
	_, db, err := runs.Open(ctx, storeURL)
	if err != nil {
		return nil, nil, err
	}
	filter, done, err := trainset.SQLFilter(ctx, db, dialect == lineage.Postgres, f.where)
	if err != nil {
		_ = db.Close()
		return nil, nil, &exitError{code: 2, err: fmt.Errorf("--where: %w", err)}
	}
	return filter, func() error { return errors.Join(done(), db.Close()) }, nil
}
