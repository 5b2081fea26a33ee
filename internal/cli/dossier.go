package cli

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/internal/coordinator"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

func newDossierCmd(env *Env) *cobra.Command {
	var f storeFlags
	var format, out string
	var prices []string
	var c *cobra.Command
	c = &cobra.Command{
		Use:   "dossier RUN",
		Short: "write a run's evidence dossier (graph, route, rejected branches, tool calls, workspace, memory, approvals, usage, output, hash) as md or html",
		Long: "dossier writes one self-contained document per run. The HTML needs no network: inline CSS and SVG, no scripts.\n" +
			"Costs come from --price MODEL=PROMPT/COMPLETION (US dollars per million tokens), repeatable.",
		Args: cobra.ExactArgs(1),
		RunE: f.withStore(func(ctx context.Context, st store.Store, args []string) error {
			if format != "md" && format != "html" {
				return &exitError{code: 2, err: fmt.Errorf("--format must be md or html, not %q", format)}
			}
			if f.output == "json" && c.Flags().Changed("format") {
				return &exitError{code: 2, err: fmt.Errorf("-o json writes the dossier as JSON: drop --format %s", format)}
			}
			opts := lineage.DossierOptions{Prices: map[string]lineage.Price{}}
			for _, p := range prices {
				model, price, err := parsePrice(p)
				if err != nil {
					return &exitError{code: 2, err: err}
				}
				opts.Prices[model] = price
			}
			rs, db, err := runs.Open(ctx, storeURLOf(f))
			if err != nil {
				return err
			}
			defer db.Close()
			run, err := rs.Get(ctx, args[0])
			if err != nil {
				return fmt.Errorf("run %s: %w", args[0], err)
			}
			opts.Status, opts.Error = string(run.Status), run.Error
			info := coordinator.RunLineage(run)
			g, err := lineage.ForRun(ctx, st, info)
			if err != nil {
				return err
			}
			if opts.MemoryWritten, err = memoryWrites(ctx, db, g); err != nil {
				return err
			}
			d, err := lineage.BuildDossier(ctx, st, info, opts)
			if err != nil {
				return err
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
			if f.output == "json" {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(d)
			}
			if format == "html" {
				return d.WriteHTML(w)
			}
			return d.WriteMarkdown(w)
		}),
	}
	f.register(c)
	c.Flags().StringVar(&format, "format", "md", "md or html")
	c.Flags().StringVar(&out, "out", "", "write to FILE instead of standard output")
	c.Flags().StringArrayVar(&prices, "price", nil, "MODEL=PROMPT/COMPLETION in USD per million tokens (repeatable)")
	return c
}

// storeURLOf is the store f names (--store, else RATH_STORE); only called
// once f.open has succeeded, so one is named.
func storeURLOf(f storeFlags) string {
	return cmp.Or(f.url, os.Getenv("RATH_STORE"))
}

// parsePrice reads MODEL=PROMPT/COMPLETION.
func parsePrice(s string) (string, lineage.Price, error) {
	model, rest, ok := strings.Cut(s, "=")
	in, outp, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || model == "" {
		return "", lineage.Price{}, fmt.Errorf("--price %q: want MODEL=PROMPT/COMPLETION (USD per million tokens)", s)
	}
	a, err1 := strconv.ParseFloat(in, 64)
	b, err2 := strconv.ParseFloat(outp, 64)
	if err := errors.Join(err1, err2); err != nil || a < 0 || b < 0 {
		return "", lineage.Price{}, fmt.Errorf("--price %q: prices must be non-negative numbers", s)
	}
	return model, lineage.Price{Prompt: a, Completion: b}, nil
}

// memoryWrites lists the memory items the graph's versions wrote or
// deleted (memory_items.version_id / deleted_version_id), on either backend.
func memoryWrites(ctx context.Context, db *sql.DB, g *lineage.Graph) ([]lineage.MemoryWrite, error) {
	if len(g.Nodes) == 0 {
		return nil, nil
	}
	ids := make([]string, len(g.Nodes))
	for i, n := range g.Nodes {
		ids[i] = "'" + n.ID.String() + "'" // canonical UUIDs: safe to inline, and the same SQL on both dialects
	}
	list := strings.Join(ids, ",")
	rows, err := db.QueryContext(ctx, `SELECT namespace, uri, text, version_id, COALESCE(deleted_version_id, '') FROM memory_items
		WHERE version_id IN (`+list+`) OR deleted_version_id IN (`+list+`) ORDER BY created_at, uri`)
	if err != nil {
		return nil, fmt.Errorf("memory written by the run: %w", err)
	}
	defer rows.Close()
	var out []lineage.MemoryWrite
	for rows.Next() {
		var m lineage.MemoryWrite
		var deleted string
		if err := rows.Scan(&m.Namespace, &m.URI, &m.Text, &m.Version, &deleted); err != nil {
			return nil, fmt.Errorf("memory written by the run: %w", err)
		}
		if deleted != "" {
			if _, err := session.ParseID(deleted); err == nil {
				m.Deleted, m.Version = true, deleted
			}
		}
		out = append(out, m)
	}
	return out, rows.Err()
}
