package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
)

// serverFlags are the flags of commands that talk to a coordinator.
type serverFlags struct {
	server string
	token  string
	output string
}

func (f *serverFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.server, "server", "", "coordinator URL (default $RATH_SERVER, else the logged-in server, else "+defaultServer+")")
	c.Flags().StringVar(&f.token, "token", "", "API bearer token (default $RATH_TOKEN, else the logged-in token)")
	c.Flags().StringVarP(&f.output, "output", "o", "text", "output format: text or json")
}

func (f *serverFlags) client() (*client.Client, error) {
	if f.output != "text" && f.output != "json" {
		return nil, &exitError{code: 2, err: fmt.Errorf("--output: %q is not text or json", f.output)}
	}
	w := serverTarget(f.server, f.token)
	cl, err := client.New(w.server, w.token)
	if err != nil {
		return nil, &exitError{code: 2, err: fmt.Errorf("--server: %w", err)}
	}
	return cl, nil
}

// LoadAgentSpec reads an agent spec file and inlines its script_file
// (resolved relative to the spec) so the spec can travel to any worker.
func LoadAgentSpec(path string) (agent.Spec, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return agent.Spec{}, fmt.Errorf("agent file: %w", err)
	}
	spec, err := agent.ParseSpecFile(path, raw)
	if err != nil {
		// A bad spec is bad input: file:line:col, the field, exit 2.
		return agent.Spec{}, &exitError{code: 2, err: err}
	}
	if spec.ScriptFile != "" {
		p := spec.ScriptFile
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(path), p)
		}
		if spec.Script, err = llm.LoadScript(p); err != nil {
			return agent.Spec{}, fmt.Errorf("%s: script_file: %w", path, err)
		}
		spec.ScriptFile = ""
	}
	return spec, nil
}

func newRunCmd(env *Env) *cobra.Command {
	var f serverFlags
	var agentFile, message, sessionID, queue, timeout, sandbox string
	var watch bool
	var budget api.Budget
	c := &cobra.Command{
		Use:   "run (--agent FILE | FILE) (--message TEXT | --session ID) [--sandbox local|docker[:IMAGE]] [--watch]",
		Short: "submit a run: forward a session through an agent, or a workflow file",
		Long: "Submit a run. FILE is an agent spec or a declarative workflow file (one with top-level steps,\n" +
			"docs/workflows.md), which the coordinator validates and drives durably.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && agentFile != "" {
				return &exitError{code: 2, err: fmt.Errorf("give the file as an argument or with --agent, not both")}
			}
			if (message == "") == (sessionID == "") {
				return &exitError{code: 2, err: fmt.Errorf("give exactly one of --message and --session")}
			}
			workflow := false
			if len(args) == 1 {
				agentFile = args[0]
				var err error
				if workflow, err = fileKind(agentFile); err != nil {
					return &exitError{code: 2, err: err}
				}
			}
			if agentFile == "" {
				return &exitError{code: 2, err: fmt.Errorf("--agent (or a workflow file) is required")}
			}
			place, err := parseSandbox(sandbox)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			if workflow && sandbox != "" {
				return &exitError{code: 2, err: fmt.Errorf("--sandbox: a workflow file places its agents itself; --sandbox is for an agent run")}
			}
			cl, err := f.client()
			if err != nil {
				return err
			}
			if err := budget.Validate(); err != nil {
				return &exitError{code: 2, err: err}
			}
			if workflow {
				r, err := submitWorkflowFile(cmd.Context(), cl, workflowRun{path: agentFile, message: message,
					session: sessionID, queue: queue, timeout: timeout, budget: budget})
				if err != nil {
					return err
				}
				if !watch {
					return printRun(env.Out, f.output, r)
				}
				return watchRun(cmd.Context(), env, cl, f.output, r.ID)
			}
			spec, err := LoadAgentSpec(agentFile)
			if errors.Is(err, agent.ErrInvalidSpec) {
				return &exitError{code: 2, err: err} // a bad spec is bad input, like a bad flag
			}
			if err != nil {
				return err
			}
			if sandbox != "" {
				// --sandbox replaces the spec's sandbox block: the
				// coordinator places the input session (op place) after
				// checking the operator's policy.
				spec.Sandbox = &agent.Sandbox{Backend: place.Backend, Image: place.Spec.Image}
			}
			specJSON, err := json.Marshal(spec)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			r, err := cl.SubmitAgent(ctx, api.SubmitRequest{Agent: specJSON, Message: message, Session: sessionID,
				Queue: queue, Budget: budget, Timeout: timeout})
			if ae := (*client.APIError)(nil); errors.As(err, &ae) && ae.Status == http.StatusBadRequest {
				// The coordinator refused what was submitted (a tool no
				// worker offers, a placement the policy forbids): bad input,
				// like a spec error found here, at its field in the file.
				return &exitError{code: 2, err: locateRefusal(agentFile, ae)}
			}
			if err != nil {
				return err
			}
			if !watch {
				return printRun(env.Out, f.output, r)
			}
			return watchRun(ctx, env, cl, f.output, r.ID)
		},
	}
	f.register(c)
	c.Flags().StringVarP(&agentFile, "agent", "a", "", "agent spec file (YAML or JSON)")
	c.Flags().StringVarP(&message, "message", "m", "", "start a new session with this user message")
	c.Flags().StringVar(&sessionID, "session", "", "forward this existing session version")
	c.Flags().StringVar(&sandbox, "sandbox", "", "run the agent's tools on this sandbox: local, docker or docker:IMAGE (a version with op place is recorded first)")
	c.Flags().StringVar(&queue, "queue", "", "job queue (default: the coordinator's)")
	c.Flags().BoolVarP(&watch, "watch", "w", false, "stream the run live until it ends")
	c.Flags().StringVar(&timeout, "timeout", "", "the run's deadline from now (e.g. 10m); past it the run ends timed_out")
	c.Flags().Int64Var(&budget.MaxTokens, "max-tokens", 0, "the run's token budget (0: unlimited); crossing it ends the step cleanly")
	c.Flags().Float64Var(&budget.MaxCostUSD, "max-cost-usd", 0, "the run's cost budget in USD, priced with the agent's pricing (0: unlimited)")
	return c
}

// watchRun streams a run's events through pkg/client's watch (from the
// run's start, so a run that ended before the watch attached still prints
// its whole story), then prints its final state and answer. It returns an
// error (exit 1) when the run did not succeed, and exit 3 when it waits for
// a decision.
func watchRun(ctx context.Context, env *Env, cl *client.Client, output, runID string) error {
	if output == "text" {
		fmt.Fprintf(env.Out, "run %s\n", runID)
	}
	text := newStreamText(env.Out)
	err := cl.Watch(ctx, runID, func(e api.Event) error {
		if output == "json" {
			b, err := json.Marshal(e)
			if err != nil {
				return err
			}
			fmt.Fprintln(env.Out, string(b))
			return nil
		}
		switch e.Type {
		case api.EventStepToken:
			text.token(e.StepID, e.Token())
		default:
			text.event(e)
			data := strings.TrimSpace(string(e.Data))
			if e.Type == api.EventStepToolCall || e.Type == api.EventStepToolResult {
				data = toolEventText(e.Data)
			}
			fmt.Fprintf(env.Out, "  %s %-15s %s\n", e.Time.Local().Format("15:04:05.000"), e.Type, data)
		}
		return nil
	})
	if err != nil {
		return err
	}
	text.flush()
	// The stored run is the truth; its end may lag its end event a moment.
	r, err := cl.Settled(ctx, runID)
	if err != nil {
		return err
	}
	if output == "text" {
		if err := printRunSummary(ctx, env.Out, cl, r); err != nil {
			return err
		}
	}
	if r.Status == api.RunWaiting {
		return &exitError{code: 3, err: fmt.Errorf("run %s is waiting for approval: decide with rathctl approve|reject %s", r.ID, r.ID)}
	}
	if r.Status == api.RunNeedsReview {
		return &exitError{code: 3, err: fmt.Errorf("run %s needs a review of an ambiguous tool call (rathctl runs show %s): decide with rathctl review %s --retry | --skip --result JSON | --fail --reason TEXT", r.ID, r.ID, r.ID)}
	}
	if r.Status != api.RunSucceeded {
		return fmt.Errorf("run %s %s: %s", r.ID, r.Status, r.Error)
	}
	return nil
}

// printRunSummary prints a run's status, its output version and usage, and
// its final answer: the text of the output's last assistant chunk.
func printRunSummary(ctx context.Context, w io.Writer, cl *client.Client, r api.Run) error {
	fmt.Fprintf(w, "run %s %s\n", r.ID, r.Status)
	if r.Output == nil {
		return nil
	}
	g := cl.Graph()
	v, err := g.Get(ctx, *r.Output)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "output version %s (%d chunks), usage prompt=%d completion=%d total=%d\n",
		v.ID, v.Len, v.Usage.PromptTokens, v.Usage.CompletionTokens, v.Usage.TotalTokens)
	chunks, err := g.Transcript(ctx, *r.Output)
	if err != nil {
		return err
	}
	for i := len(chunks) - 1; i >= 0; i-- {
		if c := chunks[i]; c.Kind() == session.KindAssistant && c.Text() != "" {
			fmt.Fprintf(w, "answer: %s\n", c.Text())
			break
		}
	}
	return nil
}

// printRunOutcome prints, after a run's text, what its output version
// records: the usage, and why the agent loop stopped when it was not the
// model's answer (a budget, the round limit, an approval), with a budget's
// message ("the run's token budget is spent: used 12 of 10").
func printRunOutcome(ctx context.Context, w io.Writer, cl *client.Client, r api.Run) error {
	if r.Output == nil {
		return nil
	}
	g := cl.Graph()
	v, err := g.Get(ctx, *r.Output)
	if err != nil {
		return fmt.Errorf("run %s: output %s: %w", r.ID, r.Output, err)
	}
	fmt.Fprintf(w, "usage   prompt=%d completion=%d total=%d\n", v.Usage.PromptTokens, v.Usage.CompletionTokens, v.Usage.TotalTokens)
	var stop string
	for _, e := range v.Extras {
		if e.Key == "loop.stop" {
			_ = json.Unmarshal(e.Value, &stop)
		}
	}
	if stop == "" || stop == agent.StopModel {
		return nil
	}
	// The budget's note is among the step's own chunks, after the last
	// user message.
	detail := ""
	chunks, err := g.Transcript(ctx, v.ID)
	if err != nil {
		return fmt.Errorf("run %s: output transcript: %w", r.ID, err)
	}
	for i := len(chunks) - 1; i >= 0 && chunks[i].Kind() != session.KindUser; i-- {
		if chunks[i].Kind() != session.KindNote {
			continue
		}
		var note struct{ Event, Message string }
		if json.Unmarshal(chunks[i].Payload(), &note) == nil && note.Event == "budget.exceeded" {
			detail = note.Message
			break
		}
	}
	if detail != "" {
		fmt.Fprintf(w, "stopped %s: %s\n", stop, detail)
	} else {
		fmt.Fprintf(w, "stopped %s\n", stop)
	}
	return nil
}

func printRun(w io.Writer, output string, r api.Run) error {
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(w, "run     %s\nstatus  %s\nqueue   %s\ninput   %s\n", r.ID, r.Status, r.Queue, r.Input)
	if r.Output != nil {
		fmt.Fprintf(w, "output  %s\n", r.Output)
	}
	if r.Error != "" {
		fmt.Fprintf(w, "error   %s\n", r.Error)
	}
	if r.ChangesAcceptedAt != nil {
		fmt.Fprintf(w, "changes accepted  %s\n", r.ChangesAcceptedAt.Local().Format(time.DateTime))
	}
	if len(r.Reviews) > 0 {
		fmt.Fprintln(w, "needs review (rathctl review RUN --retry | --skip --result JSON | --fail --reason TEXT):")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  CALL\tTOOL\tROUND\tSTARTED ON\tSTEP\tARGUMENTS")
		for _, c := range r.Reviews {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\n", c.CallID, c.Tool, c.Round, c.Worker, c.StepID, c.Arguments)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(r.Steps) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "STEP\tSTATUS\tATTEMPTS\tWORKER\tOUTPUT\tERROR")
		for _, s := range r.Steps {
			out := ""
			if s.Output != nil {
				out = s.Output.String()
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", s.ID, s.Status, s.Attempts, s.Worker, out, s.Error)
		}
		return tw.Flush()
	}
	return nil
}

func newRunsCmd(env *Env) *cobra.Command {
	c := &cobra.Command{Use: "runs", Short: "list, show, watch and cancel runs"}
	var lf serverFlags
	var limit int
	var status, before string
	list := &cobra.Command{
		Use: "list", Short: "list runs, newest first", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := lf.client()
			if err != nil {
				return err
			}
			res, err := cl.ListRuns(cmd.Context(), api.ListRunsParams{Limit: limit, Before: before, Status: api.RunStatus(status)})
			if err != nil {
				return err
			}
			if lf.output == "json" {
				return json.NewEncoder(env.Out).Encode(res)
			}
			tw := tabwriter.NewWriter(env.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "RUN\tSTATUS\tCREATED\tINPUT\tOUTPUT")
			for _, r := range res.Runs {
				out := ""
				if r.Output != nil {
					out = r.Output.String()
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.ID, r.Status, r.CreatedAt.Local().Format(time.DateTime), r.Input, out)
			}
			return tw.Flush()
		},
	}
	lf.register(list)
	list.Flags().IntVar(&limit, "limit", 50, "how many runs")
	list.Flags().StringVar(&status, "status", "", "only runs in this status (pending, running, waiting, needs_review, succeeded, failed, canceled, timed_out; waiting: those an approval decides)")
	list.Flags().StringVar(&before, "before", "", "only runs older than this run id (the next page after a list's last run)")

	var sf serverFlags
	show := &cobra.Command{
		Use: "show RUN", Short: "show a run and its steps", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := sf.client()
			if err != nil {
				return err
			}
			r, err := cl.GetRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if err := printRun(env.Out, sf.output, r); err != nil || sf.output == "json" {
				return err
			}
			return printRunOutcome(cmd.Context(), env.Out, cl, r)
		},
	}
	sf.register(show)

	var cf serverFlags
	cancel := &cobra.Command{
		Use: "cancel RUN", Short: "cancel a run", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := cf.client()
			if err != nil {
				return err
			}
			r, err := cl.CancelRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return printRun(env.Out, cf.output, r)
		},
	}
	cf.register(cancel)

	var wf serverFlags
	watch := &cobra.Command{
		Use:   "watch RUN",
		Short: "print a run's events from its start and follow it until it ends, then its final answer",
		Long: "Attach to a run, running or finished: its stored events from the start, then its live events,\n" +
			"then its final state and answer. Exit 1 when the run did not succeed, 3 when it waits for approval.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := wf.client()
			if err != nil {
				return err
			}
			// An unknown run is an error before anything is printed.
			r, err := cl.GetRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return watchRun(cmd.Context(), env, cl, wf.output, r.ID)
		},
	}
	wf.register(watch)
	c.AddCommand(list, show, cancel, watch, newRunsResumeCmd(env))
	return c
}

// toolEventText is a tool call or result event in one short line.
func toolEventText(data json.RawMessage) string {
	var e agent.Event
	if json.Unmarshal(data, &e) != nil {
		return string(data)
	}
	if e.Type == "tool.call" {
		args := e.Arguments
		if r := []rune(args); len(r) > 100 {
			args = string(r[:100]) + "…"
		}
		return fmt.Sprintf("%s %s", e.Name, args)
	}
	if e.OK {
		return e.Name + " ok"
	}
	return fmt.Sprintf("%s failed: %s", e.Name, e.ErrorKind)
}

// locateRefusal is the coordinator's refusal of the agent spec in file
// ("bad request: agent.tools[2]: unknown tool …"): at the field's line and
// column of the file ("file:line:col: tools[2]: …") when it names a tool or
// an MCP server the file lists, else the refusal after the file's name.
func locateRefusal(file string, ae *client.APIError) error {
	msg := strings.TrimPrefix(ae.Message, "bad request: ")
	rest, ok := strings.CutPrefix(msg, "agent.")
	if !ok || (!strings.HasPrefix(rest, "tools[") && !strings.HasPrefix(rest, "mcp[")) {
		return fmt.Errorf("%s: %w", file, ae)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("%s: %w", file, ae)
	}
	return agent.LocateSpecError(file, raw, fmt.Errorf("%w: %s", agent.ErrInvalidSpec, rest))
}
