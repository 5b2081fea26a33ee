package cli

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/session"
)

func newDossierCmd(env *Env) *cobra.Command {
	var f lineageFlags
	var format, out string
	var prices []string
	var c *cobra.Command
	c = &cobra.Command{
		Use:   "dossier RUN",
		Short: "write a run's evidence dossier (graph, route, rejected branches, tool calls, workspace, memory, approvals, usage, output, hash) as md or html",
		Long: "dossier writes one self-contained document per run. The HTML needs no network: inline CSS and SVG, no scripts.\n" +
			"Costs come from the pricing block of the run's agent specs; --price MODEL=PROMPT/COMPLETION (US dollars per\n" +
			"million tokens, repeatable) prices a model the specs do not, or overrides them. -o json writes\n" +
			"the dossier's data (the API's dossier JSON) instead of a document.",
		Args: cobra.ExactArgs(1),
		RunE: f.with(func(ctx context.Context, t target, args []string) error {
			if format != api.DossierMarkdown && format != api.DossierHTML {
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
				if f.output == "json" {
					d, err := t.cl.DossierData(ctx, args[0], prices)
					if err != nil {
						return fmt.Errorf("run %s: %w", args[0], err)
					}
					return writeDossierJSON(w, d)
				}
				if err := t.cl.Dossier(ctx, args[0], client.DossierOptions{Format: format, Prices: prices}, w); err != nil {
					return fmt.Errorf("run %s: %w", args[0], err)
				}
				return nil
			}
			d, err := storeDossier(ctx, t, args[0], opts)
			if err != nil {
				return err
			}
			if f.output == "json" {
				return writeDossierJSON(w, d)
			}
			if format == api.DossierHTML {
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

func writeDossierJSON(w io.Writer, d *api.Dossier) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(d)
}

// storeDossier builds run id's dossier from the store t names and the run
// store next to it.
func storeDossier(ctx context.Context, t target, id string, opts lineage.DossierOptions) (*api.Dossier, error) {
	rs, db, err := runs.Open(ctx, t.storeURL)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	run, err := rs.Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", id, err)
	}
	opts.Status, opts.Error = string(run.Status), run.Error
	// A model priced by --price keeps that price; the others cost what
	// the run's specs say (their pricing block).
	for model, price := range runs.SpecPrices(run.API()) {
		if _, ok := opts.Prices[model]; !ok {
			opts.Prices[model] = price
		}
	}
	info := runs.Lineage(run.API())
	g, err := lineage.ForRun(ctx, t.st, info)
	if err != nil {
		return nil, err
	}
	if opts.MemoryWritten, err = memoryWrites(ctx, db, g); err != nil {
		return nil, err
	}
	return lineage.BuildDossier(ctx, t.st, info, opts)
}

// parsePrice reads MODEL=PROMPT/COMPLETION (--price).
func parsePrice(s string) (string, lineage.Price, error) {
	model, p, err := lineage.ParsePrice(s)
	if err != nil {
		return "", lineage.Price{}, fmt.Errorf("--%w", err)
	}
	return model, p, nil
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
