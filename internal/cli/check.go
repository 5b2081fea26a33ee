package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/internal/check"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/lineage"
)

// newCheckCmd is `rathctl check`: the invariant checker (internal/check),
// over a store or through a coordinator (POST /v1/admin/check, an admin
// token: the token's tenant's rows only).
func newCheckCmd(env *Env) *cobra.Command {
	var f lineageFlags
	var settled bool
	c := &cobra.Command{
		Use:   "check",
		Short: "scan a store and assert the Session Graph's invariants (append-only, hash chain, acyclic, steps committed exactly once); exit 1 on any violation",
		Long: "check scans the Session Graph and its runs and asserts their invariants. Through a coordinator it scans\n" +
			"the token's tenant's rows only (an admin token). A store or tenant with no versions checks nothing: check\n" +
			"says so instead of \"ok\".",
		Args: cobra.NoArgs,
		RunE: f.withRetention(func(ctx context.Context, t target, ret lineage.Retention, _ []string) error {
			var rep api.CheckReport
			if t.cl != nil {
				var err error
				if rep, err = t.cl.Check(ctx, settled); err != nil {
					return err
				}
			} else {
				d := check.Postgres
				if ret.Dialect == lineage.SQLite {
					d = check.SQLite
				}
				r, err := check.Check(ctx, t.st, ret.DB, d, check.Options{Settled: settled})
				if err != nil {
					return err
				}
				rep = api.CheckReport{Versions: r.Versions, Chunks: r.Chunks, Edges: r.Edges, Runs: r.Runs, Steps: r.Steps, Open: r.Open,
					Problems: make([]api.CheckProblem, 0, len(r.Problems))}
				for _, p := range r.Problems {
					rep.Problems = append(rep.Problems, api.CheckProblem{Invariant: p.Invariant, Row: p.Row, Detail: p.Detail})
				}
			}
			if rep.Problems == nil {
				rep.Problems = []api.CheckProblem{}
			}
			if f.output == "json" {
				if err := (&printer{env: env}).json(rep); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(env.Out, "checked %d versions, %d chunks, %d edges, %d runs, %d steps (%d open)\n",
					rep.Versions, rep.Chunks, rep.Edges, rep.Runs, rep.Steps, rep.Open)
				for _, p := range rep.Problems {
					fmt.Fprintf(env.Out, "%s: %s: %s\n", p.Invariant, p.Row, p.Detail)
				}
				switch {
				case !rep.OK():
				case rep.Versions == 0:
					// A check of nothing cannot fail: never call it ok.
					fmt.Fprintln(env.Out, "nothing checked: no versions here (is this the store or server you meant?)")
				default:
					fmt.Fprintln(env.Out, "ok")
				}
			}
			if !rep.OK() {
				return &exitError{code: 1, err: fmt.Errorf("%w: %d problem(s), first: %s: %s: %s", check.ErrViolated, len(rep.Problems),
					rep.Problems[0].Invariant, rep.Problems[0].Row, rep.Problems[0].Detail)}
			}
			return nil
		}),
	}
	f.register(c)
	c.Flags().BoolVar(&settled, "settled", false, "also require every run and step to have ended")
	return c
}
