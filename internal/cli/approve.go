package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/client"
)

// newApprovalCmds returns rathctl approve and rathctl reject: decide the
// tool calls a waiting run paused before (POST /v1/runs/{id}/approvals).
//
// Without --watch the command returns once the run has gone on: when the
// decision leaves nothing pending, it waits (up to --wait) until a worker
// has started the continuation step, or the run has ended, and prints the
// run as it is then. With calls still pending, the run keeps waiting and
// the command returns at once.
func newApprovalCmds(env *Env) []*cobra.Command {
	mk := func(decision, short string) *cobra.Command {
		var f serverFlags
		var callID, reason string
		var watch bool
		var wait time.Duration
		c := &cobra.Command{
			Use:   decision + " RUN [--call ID] [--reason TEXT] [--watch | --wait D]",
			Short: short,
			Long: short + ".\n\nWithout --watch, " + decision + " returns once the run has gone on: when the decision leaves no call\n" +
				"pending, it waits (up to --wait) until a worker has started the step that resumes the run, or\n" +
				"the run has ended. With calls still pending the run keeps waiting and it returns at once.\n" +
				"With --watch it prints the run's story from the start until it ends or waits again.",
			Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				if decision == "reject" && reason == "" {
					return &exitError{code: 2, err: fmt.Errorf("--reason is required to reject (the model is told why)")}
				}
				if wait < 0 {
					return &exitError{code: 2, err: fmt.Errorf("--wait: %s is negative", wait)}
				}
				cl, err := f.client()
				if err != nil {
					return err
				}
				ctx := cmd.Context()
				res, err := cl.Decide(ctx, args[0], api.ApprovalRequest{CallID: callID, Decision: decision, Reason: reason})
				if err != nil {
					return err
				}
				started := true
				if !watch && res.Continuation != nil && wait > 0 {
					if started, err = awaitContinuation(ctx, cl, &res, wait); err != nil {
						return err
					}
				}
				if f.output == "json" {
					enc := json.NewEncoder(env.Out)
					enc.SetIndent("", "  ")
					if err := enc.Encode(res); err != nil || !watch {
						return err
					}
					return watchRun(ctx, env, cl, f.output, res.Run.ID)
				}
				printDecision(env, res, started, wait)
				if watch {
					return watchRun(ctx, env, cl, f.output, res.Run.ID)
				}
				return nil
			},
		}
		f.register(c)
		c.Flags().StringVar(&callID, "call", "", "decide this tool call id only (default: every pending call)")
		c.Flags().StringVar(&reason, "reason", "", "why; required to reject, and shown to the model")
		c.Flags().BoolVarP(&watch, "watch", "w", false, "then watch the run (its story from the start) until it ends or waits again")
		c.Flags().DurationVar(&wait, "wait", 30*time.Second, "without --watch: how long to wait for a worker to start the resumed step (0: do not wait)")
		return c
	}
	return []*cobra.Command{
		mk("approve", "approve the tool calls a waiting run paused before"),
		mk("reject", "reject the tool calls a waiting run paused before; the model gets the reason"),
	}
}

// approvePoll is how often approve reads the run while it waits for the
// continuation step to start.
const approvePoll = 100 * time.Millisecond

// awaitContinuation reads the run until its continuation step (res's) has
// left pending (a worker started it, or it ended) or the run has ended, at
// most wait, and puts the run and step as last read into res. started is
// false when wait passed first.
func awaitContinuation(ctx context.Context, cl *client.Client, res *api.ApprovalResponse, wait time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(approvePoll)
	defer tick.Stop()
	for {
		r, err := cl.GetRun(ctx, res.Run.ID)
		if err != nil {
			if ctx.Err() != nil {
				return false, nil
			}
			return false, err
		}
		res.Run = r
		for _, st := range r.Steps {
			if st.ID == res.Continuation.ID {
				*res.Continuation = st
			}
		}
		if res.Continuation.Status != api.StepPending || r.Terminal() {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-tick.C:
		}
	}
}

func printDecision(env *Env, res api.ApprovalResponse, started bool, wait time.Duration) {
	tw := tabwriter.NewWriter(env.Out, 0, 4, 2, ' ', 0)
	for _, d := range res.Decided {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", d.Decision, d.CallID, d.Tool, d.Reason)
	}
	for _, p := range res.Pending {
		fmt.Fprintf(tw, "pending\t%s\t%s\t%s\n", p.CallID, p.Tool, p.Arguments)
	}
	_ = tw.Flush()
	if len(res.Decided) == 0 {
		fmt.Fprintln(env.Out, "no new decision (already decided)")
	}
	switch {
	case res.Continuation == nil:
		fmt.Fprintf(env.Out, "run %s %s\n", res.Run.ID, res.Run.Status)
	case !started && wait > 0:
		fmt.Fprintf(env.Out, "run %s %s: continues as step %s, still %s after %s (no worker has taken it yet)\n",
			res.Run.ID, res.Run.Status, res.Continuation.ID, res.Continuation.Status, wait)
	default:
		fmt.Fprintf(env.Out, "run %s %s: continues as step %s (%s)\n", res.Run.ID, res.Run.Status, res.Continuation.ID, res.Continuation.Status)
	}
}
