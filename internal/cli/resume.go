package cli

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

// newRunsResumeCmd is `rathctl runs resume RUN --accept-changes`: the
// explicit acceptance a workflow run needs to go on after its workflow
// changed (POST /v1/runs/{id}/accept-changes).
func newRunsResumeCmd(env *Env) *cobra.Command {
	var f serverFlags
	var accept bool
	c := &cobra.Command{
		Use:   "resume RUN --accept-changes",
		Short: "let a workflow run whose workflow changed go on, keeping its recorded steps",
		Long: "A workflow run resumes by itself when its driver restarts (the coordinator for a workflow file;\n" +
			"your program, re-executed on the run, for a Go workflow). When the workflow changed meanwhile, a\n" +
			"step whose input or call is no longer what was recorded fails the run as nondeterministic, naming\n" +
			"the step and both digests. --accept-changes records (on the run, and as an event) that such steps\n" +
			"keep their recorded results, and reopens a run that failed for it: the coordinator resumes a\n" +
			"workflow file's run; re-execute a Go workflow on the run yourself. -o json prints the API's reply.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !accept {
				return &exitError{code: 2, err: errors.New("--accept-changes: required (a run resumes by itself when its driver restarts; this command only records that changed steps keep their recorded results)")}
			}
			cl, err := f.client()
			if err != nil {
				return err
			}
			reply, err := cl.AcceptChanges(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if f.output == "json" {
				enc := json.NewEncoder(env.Out)
				enc.SetIndent("", "  ")
				return enc.Encode(reply)
			}
			if reply.Reopened {
				fmt.Fprintf(env.Out, "run %s reopened: changed steps keep their recorded results\n", reply.Run.ID)
			} else {
				fmt.Fprintf(env.Out, "run %s accepts changes: changed steps keep their recorded results\n", reply.Run.ID)
			}
			return printRun(env.Out, f.output, reply.Run)
		},
	}
	f.register(c)
	c.Flags().BoolVar(&accept, "accept-changes", false, "accept that steps whose input or call changed keep their recorded results (required)")
	return c
}
