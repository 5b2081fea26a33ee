package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/pkg/api"
)

// newReviewCmd returns rathctl review: decide an ambiguous tool call a run
// in needs_review stopped on (POST /v1/runs/{id}/review). Exactly one of
// --retry, --skip (with --result) and --fail (with --reason).
func newReviewCmd(env *Env) *cobra.Command {
	var f serverFlags
	var callID, result, reason string
	var retry, skip, fail bool
	c := &cobra.Command{
		Use:   "review RUN (--retry | --skip --result JSON | --fail --reason TEXT) [--call ID]",
		Short: "decide an ambiguous tool call a run in needs_review stopped on",
		Long: "Decide an ambiguous tool call: one a worker started and recorded no result for before it died,\n" +
			"to a tool not declared idempotent (rathctl runs show lists them). --retry runs the call again;\n" +
			"--skip uses --result (the JSON the tool would have returned) without running it; --fail fails the\n" +
			"step with --reason. The step resumes at once; the decision is a review chunk in its transcript.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n := 0
			req := api.ReviewRequest{CallID: callID, Reason: reason}
			for _, d := range []struct {
				set  bool
				name string
			}{{retry, api.ReviewRetry}, {skip, api.ReviewSkip}, {fail, api.ReviewFail}} {
				if d.set {
					n++
					req.Decision = d.name
				}
			}
			switch {
			case n != 1:
				return &exitError{code: 2, err: fmt.Errorf("give exactly one of --retry, --skip and --fail")}
			case skip && result == "":
				return &exitError{code: 2, err: fmt.Errorf("--result is required with --skip (the JSON the tool would have returned)")}
			case !skip && result != "":
				return &exitError{code: 2, err: fmt.Errorf("--result goes with --skip only")}
			case skip && !json.Valid([]byte(result)):
				return &exitError{code: 2, err: fmt.Errorf("--result: not valid JSON")}
			case fail && reason == "":
				return &exitError{code: 2, err: fmt.Errorf("--reason is required with --fail")}
			}
			if skip {
				req.Result = json.RawMessage(result)
			}
			cl, err := f.client()
			if err != nil {
				return err
			}
			res, err := cl.Review(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			if f.output == "json" {
				enc := json.NewEncoder(env.Out)
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			fmt.Fprintf(env.Out, "%s\t%s\t%s\tround %d\n", res.Decision, res.Call.CallID, res.Call.Tool, res.Call.Round)
			fmt.Fprintf(env.Out, "step %s %s\n", res.Step.ID, res.Step.Status)
			return nil
		},
	}
	f.register(c)
	c.Flags().BoolVar(&retry, "retry", false, "run the call again")
	c.Flags().BoolVar(&skip, "skip", false, "do not run the call; use --result as its result")
	c.Flags().BoolVar(&fail, "fail", false, "fail the step with --reason")
	c.Flags().StringVar(&result, "result", "", "with --skip: the JSON the tool would have returned")
	c.Flags().StringVar(&reason, "reason", "", "why (required with --fail)")
	c.Flags().StringVar(&callID, "call", "", "the call id (default: the only call the run waits on)")
	return c
}
