package cli

import (
	"encoding/json"
	"fmt"
	"net/url"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/internal/coordinator"
)

// newApprovalCmds returns rathctl approve and rathctl reject: decide the
// tool calls a waiting run paused before (POST /v1/runs/{id}/approvals).
func newApprovalCmds(env *Env) []*cobra.Command {
	mk := func(decision, short string) *cobra.Command {
		var f serverFlags
		var callID, reason string
		var watch bool
		c := &cobra.Command{
			Use:   decision + " RUN [--call ID] [--reason TEXT] [--watch]",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				if decision == "reject" && reason == "" {
					return &exitError{code: 2, err: fmt.Errorf("--reason is required to reject (the model is told why)")}
				}
				cl, err := f.client()
				if err != nil {
					return err
				}
				var res coordinator.ApprovalResponse
				req := coordinator.ApprovalRequest{CallID: callID, Decision: decision, Reason: reason}
				if err := cl.Do(cmd.Context(), "POST", "/v1/runs/"+url.PathEscape(args[0])+"/approvals", req, &res); err != nil {
					return err
				}
				if f.output == "json" {
					enc := json.NewEncoder(env.Out)
					enc.SetIndent("", "  ")
					if err := enc.Encode(res); err != nil || !watch {
						return err
					}
					return watchRun(cmd.Context(), env, cl, f.output, res.Run.ID)
				}
				tw := tabwriter.NewWriter(env.Out, 0, 4, 2, ' ', 0)
				for _, d := range res.Decided {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", d.Decision, d.CallID, d.Tool, d.Reason)
				}
				for _, p := range res.Pending {
					fmt.Fprintf(tw, "pending\t%s\t%s\t%s\n", p.CallID, p.Tool, p.Arguments)
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				if len(res.Decided) == 0 {
					fmt.Fprintln(env.Out, "no new decision (already decided)")
				}
				if res.Continuation != nil {
					fmt.Fprintf(env.Out, "run %s %s: continues as step %s\n", res.Run.ID, res.Run.Status, res.Continuation.ID)
				} else {
					fmt.Fprintf(env.Out, "run %s %s\n", res.Run.ID, res.Run.Status)
				}
				if watch {
					return watchRun(cmd.Context(), env, cl, f.output, res.Run.ID)
				}
				return nil
			},
		}
		f.register(c)
		c.Flags().StringVar(&callID, "call", "", "decide this tool call id only (default: every pending call)")
		c.Flags().StringVar(&reason, "reason", "", "why; required to reject, and shown to the model")
		c.Flags().BoolVarP(&watch, "watch", "w", false, "then watch the run (its story from the start) until it ends or waits again")
		return c
	}
	return []*cobra.Command{
		mk("approve", "approve the tool calls a waiting run paused before"),
		mk("reject", "reject the tool calls a waiting run paused before; the model gets the reason"),
	}
}
