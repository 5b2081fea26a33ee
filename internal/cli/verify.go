package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// verifyReply is `rathctl verify -o json`'s output.
type verifyReply struct {
	OK bool `json:"ok"`
	// ID is the version checked with its ancestry; empty with --all.
	ID       string   `json:"id,omitempty"`
	Versions int      `json:"versions"`
	Chunks   int      `json:"chunks"`
	Edges    int      `json:"edges,omitempty"`
	Problems []string `json:"problems"`
}

func newVerifyCmd(env *Env) *cobra.Command {
	var f storeFlags
	var all bool
	c := &cobra.Command{
		Use:   "verify ID | --all",
		Short: "recompute the hash chain from the stored rows: of a version and everything it descends from, or of the whole store",
		Long: "verify reads the rows back past every cache and recomputes every chunk and version hash.\n" +
			"Each mismatch names the row: table, id (and ord for a chunk) and column. Exit status 1 when anything does not verify.",
		Args: cobra.MaximumNArgs(1),
		RunE: f.withStore(func(ctx context.Context, st store.Store, args []string) error {
			if all == (len(args) == 1) {
				return &exitError{code: 2, err: errors.New("give a version ID or --all (one of them)")}
			}
			var rep verifyReply
			var err error
			if all {
				var r store.VerifyReport
				r, err = st.Verify(ctx)
				rep = verifyReply{Versions: r.Versions, Chunks: r.Chunks, Edges: r.Edges, Problems: r.Problems}
			} else {
				id, perr := parseID(args[0])
				if perr != nil {
					return perr
				}
				var r lineage.VerifyReport
				r, err = lineage.Verify(ctx, st, id)
				rep = verifyReply{ID: id.String(), Versions: r.Versions, Chunks: r.Chunks}
				for _, p := range r.Problems {
					rep.Problems = append(rep.Problems, p.String())
				}
			}
			if err != nil && !errors.Is(err, session.ErrHashMismatch) {
				return err
			}
			rep.OK = len(rep.Problems) == 0
			if rep.Problems == nil {
				rep.Problems = []string{}
			}
			if f.output == "json" {
				if perr := (&printer{env: env}).json(rep); perr != nil {
					return perr
				}
			} else {
				for _, p := range rep.Problems {
					fmt.Fprintln(env.Out, "MISMATCH", p)
				}
				status := "ok"
				if !rep.OK {
					status = fmt.Sprintf("%d problem(s)", len(rep.Problems))
				}
				fmt.Fprintf(env.Out, "verified %d versions, %d chunks: %s\n", rep.Versions, rep.Chunks, status)
			}
			if !rep.OK {
				return &exitError{code: 1, err: fmt.Errorf("the hash chain does not verify: %d problem(s)", len(rep.Problems))}
			}
			return nil
		}),
	}
	f.register(c)
	c.Flags().BoolVar(&all, "all", false, "verify every row of the store")
	return c
}
