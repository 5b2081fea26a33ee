package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/session"
)

func newVerifyCmd(env *Env) *cobra.Command {
	var f lineageFlags
	var all bool
	c := &cobra.Command{
		Use:   "verify ID | --all",
		Short: "recompute the hash chain from the stored rows: of a version and everything it descends from, or of the whole store (a coordinator: the whole tenant)",
		Long: "verify reads the rows back past every cache and recomputes every chunk and version hash.\n" +
			"Each mismatch names the row: table, id (and ord for a chunk) and column. Exit status 1 when anything does not\n" +
			"verify, and when nothing was checked (an empty store or tenant: a check of 0 versions could not have failed).\n" +
			"Through a coordinator (--server) it checks the coordinator's rows of the token's tenant.",
		Args: cobra.MaximumNArgs(1),
		RunE: f.with(func(ctx context.Context, t target, args []string) error {
			if all == (len(args) == 1) {
				return &exitError{code: 2, err: errors.New("give a version ID or --all (one of them)")}
			}
			var id session.ID
			if !all {
				var err error
				if id, err = parseID(args[0]); err != nil {
					return err
				}
			}
			rep, err := verifyOn(ctx, t, id, all)
			if err != nil {
				return err
			}
			if f.output == "json" {
				if perr := (&printer{env: env}).json(rep); perr != nil {
					return perr
				}
			} else {
				for _, p := range rep.Problems {
					fmt.Fprintln(env.Out, "MISMATCH", p)
				}
				fmt.Fprintln(env.Out, rep.Summary())
			}
			switch {
			case len(rep.Problems) > 0:
				return &exitError{code: 1, err: fmt.Errorf("the hash chain does not verify: %d problem(s)", len(rep.Problems))}
			case !rep.OK:
				return &exitError{code: 1, err: errors.New("verified 0 versions: nothing was checked")}
			}
			return nil
		}),
	}
	f.register(c)
	c.Flags().BoolVar(&all, "all", false, "verify every row of the store (of the tenant, through a coordinator)")
	return c
}

// verifyOn checks id (or everything, with all) on t's coordinator or store.
func verifyOn(ctx context.Context, t target, id session.ID, all bool) (api.VerifyReport, error) {
	switch {
	case t.cl != nil && all:
		return t.cl.VerifyAll(ctx)
	case t.cl != nil:
		return t.cl.Verify(ctx, id)
	}
	var rep api.VerifyReport
	if all {
		r, err := t.st.Verify(ctx)
		if err != nil && !errors.Is(err, session.ErrHashMismatch) {
			return rep, err
		}
		rep = api.VerifyReport{Versions: r.Versions, Chunks: r.Chunks, Edges: r.Edges, Problems: r.Problems}
	} else {
		r, err := lineage.Verify(ctx, t.st, id)
		if err != nil && !errors.Is(err, session.ErrHashMismatch) {
			return rep, err
		}
		rep = api.VerifyReport{ID: id.String(), Versions: r.Versions, Chunks: r.Chunks}
		for _, p := range r.Problems {
			rep.Problems = append(rep.Problems, p.String())
		}
	}
	rep.Finish()
	return rep, nil
}
