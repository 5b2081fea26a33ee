package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/store"
)

func newRedactCmds(env *Env) []*cobra.Command {
	var f, lf storeFlags
	var ord int
	var reason string
	redact := &cobra.Command{
		Use:   "redact VERSION --chunk N --reason TEXT",
		Short: "erase chunk N of VERSION's transcript, keeping its hash so the chain still verifies; the redaction is recorded",
		Long: "redact replaces the content of chunk N (its ord in VERSION's transcript) with a marker that keeps the chunk's\n" +
			"hash, in the row that stores it and in every other row holding the same chunk (a merge stores copies), and\n" +
			"records each in the redactions table. It is the one path allowed to change graph rows (Postgres: the\n" +
			"rath_redact function and role; see docs/lineage.md). It takes effect everywhere at once: once redact\n" +
			"returns, no running coordinator or worker on the same database serves the old content from its cache.",
		Args: cobra.ExactArgs(1),
		RunE: f.withRetention(func(ctx context.Context, st store.Store, ret lineage.Retention, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			if ord < 0 {
				return &exitError{code: 2, err: errors.New("--chunk N is required (the chunk's ord in the transcript, from 0)")}
			}
			if strings.TrimSpace(reason) == "" {
				return &exitError{code: 2, err: errors.New("--reason is required: it is recorded with the redaction")}
			}
			done, err := ret.Redact(ctx, id, ord, reason)
			if err != nil {
				return err
			}
			if f.output == "json" {
				return (&printer{env: env}).json(map[string]any{"redactions": done})
			}
			for _, d := range done {
				fmt.Fprintf(env.Out, "redacted chunks row (version_id=%s, ord=%d) hash %s\n", d.Version, d.Ord, d.Hash)
			}
			return nil
		}),
	}
	f.register(redact)
	redact.Flags().IntVar(&ord, "chunk", -1, "the chunk's ord in VERSION's transcript (required)")
	redact.Flags().StringVar(&reason, "reason", "", "why, recorded with the redaction (required)")
	list := &cobra.Command{
		Use:   "redactions",
		Short: "list recorded redactions, and any redaction marker no redaction recorded",
		Args:  cobra.NoArgs,
		RunE: lf.withRetention(func(ctx context.Context, _ store.Store, ret lineage.Retention, _ []string) error {
			rs, err := ret.Redactions(ctx)
			if err != nil {
				return err
			}
			ps, err := ret.CheckRedactions(ctx)
			if err != nil {
				return err
			}
			if lf.output == "json" {
				if rs == nil {
					rs = []lineage.Redaction{}
				}
				if err := (&printer{env: env}).json(map[string]any{"redactions": rs, "problems": ps}); err != nil {
					return err
				}
			} else {
				for _, r := range rs {
					fmt.Fprintf(env.Out, "%s  %s  ord %d  %s  by %s: %s\n", r.At.Format("2006-01-02T15:04:05Z"), r.Version, r.Ord, r.Hash, r.By, r.Reason)
				}
				for _, p := range ps {
					fmt.Fprintf(env.Out, "MISMATCH %s\n", p)
				}
			}
			if len(ps) > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d redaction marker(s) no redaction recorded", len(ps))}
			}
			return nil
		}),
	}
	lf.register(list)
	return []*cobra.Command{redact, list}
}
