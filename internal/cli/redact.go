package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/lineage"
)

func newRedactCmds(env *Env) []*cobra.Command {
	var f, lf lineageFlags
	var ord int
	var reason string
	redact := &cobra.Command{
		Use:   "redact VERSION --chunk N --reason TEXT",
		Short: "erase chunk N of VERSION's transcript, keeping its hash so the chain still verifies; the redaction is recorded",
		Long: "redact replaces the content of chunk N (its ord in VERSION's transcript) with a marker that keeps the chunk's\n" +
			"hash, in the row that stores it and in every other row holding the same chunk (a merge stores copies), and\n" +
			"records each in the redactions table. It is the one path allowed to change graph rows (Postgres: the\n" +
			"rath_redact function and role; see docs/lineage.md). It takes effect everywhere at once: once redact\n" +
			"returns, no running coordinator or worker on the same database serves the old content from its cache.\n" +
			"Through a coordinator (POST /v1/versions/{id}/redact, an admin token) it acts on the token's tenant's rows only.",
		Args: cobra.ExactArgs(1),
		RunE: f.withRetention(func(ctx context.Context, t target, ret lineage.Retention, args []string) error {
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
			var reply api.RedactReply
			if t.cl != nil {
				reply, err = t.cl.Redact(ctx, id, ord, reason)
			} else {
				reply.Redactions, err = ret.Redact(ctx, id, ord, reason)
			}
			if err != nil {
				return err
			}
			if f.output == "json" {
				if reply.Redactions == nil {
					reply.Redactions = []api.Redaction{}
				}
				return (&printer{env: env}).json(reply)
			}
			for _, d := range reply.Redactions {
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
		RunE: lf.withRetention(func(ctx context.Context, t target, ret lineage.Retention, _ []string) error {
			var rl api.RedactionList
			var err error
			if t.cl != nil {
				rl, err = t.cl.Redactions(ctx)
			} else if rl.Redactions, err = ret.Redactions(ctx); err == nil {
				rl.Problems, err = ret.CheckRedactions(ctx)
			}
			if err != nil {
				return err
			}
			if lf.output == "json" {
				if rl.Redactions == nil {
					rl.Redactions = []api.Redaction{}
				}
				if rl.Problems == nil {
					rl.Problems = []api.RedactionProblem{}
				}
				if err := (&printer{env: env}).json(rl); err != nil {
					return err
				}
			} else {
				for _, r := range rl.Redactions {
					fmt.Fprintf(env.Out, "%s  %s  ord %d  %s  by %s: %s\n", r.At.Format("2006-01-02T15:04:05Z"), r.Version, r.Ord, r.Hash, r.By, r.Reason)
				}
				for _, p := range rl.Problems {
					fmt.Fprintf(env.Out, "MISMATCH %s\n", p)
				}
			}
			if len(rl.Problems) > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d redaction marker(s) no redaction recorded", len(rl.Problems))}
			}
			return nil
		}),
	}
	lf.register(list)
	return []*cobra.Command{redact, list}
}
