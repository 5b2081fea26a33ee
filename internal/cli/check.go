package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/internal/check"
)

// newCheckCmd is `rathctl check`: the invariant checker (internal/check).
func newCheckCmd(env *Env) *cobra.Command {
	var url, output string
	var settled bool
	c := &cobra.Command{
		Use:   "check",
		Short: "scan a store and assert the Session Graph's invariants (append-only, hash chain, acyclic, steps committed exactly once); exit 1 on any violation",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return &exitError{code: 2, err: fmt.Errorf("--output must be text or json, not %q", output)}
			}
			u, err := storeURLFrom(url)
			if err != nil {
				return err
			}
			rep, err := check.Run(cmd.Context(), u, check.Options{Settled: settled})
			if err != nil {
				return err
			}
			if output == "json" {
				if err := json.NewEncoder(env.Out).Encode(rep); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(env.Out, "checked %d versions, %d chunks, %d edges, %d runs, %d steps (%d open)\n",
					rep.Versions, rep.Chunks, rep.Edges, rep.Runs, rep.Steps, rep.Open)
				for _, p := range rep.Problems {
					fmt.Fprintln(env.Out, p)
				}
				if rep.OK() {
					fmt.Fprintln(env.Out, "ok")
				}
			}
			if !rep.OK() {
				return &exitError{code: 1, err: rep.Err()}
			}
			return nil
		},
	}
	c.Flags().StringVar(&url, "store", "", "store URL: postgres://… or sqlite:PATH (default $RATH_STORE)")
	c.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	c.Flags().BoolVar(&settled, "settled", false, "also require every run and step to have ended")
	return c
}
