package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/flowfile"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
)

// maxRerunPath bounds the first-parent walk from VERSION back to ANCESTOR.
const maxRerunPath = 10_000

// Rerun actions, as reported per version of the path.
const (
	rerunAppended = api.RerunAppended
	rerunRan      = api.RerunRan
	rerunSkipped  = api.RerunSkipped
)

// rerunItem is one version of the path and how to re-apply it.
type rerunItem struct {
	v      *session.Version
	action string
	spec   agent.Spec // for rerunRan
	queue  string     // the original run's queue, for rerunRan
}

// rerunner re-applies a first-parent path through a coordinator's API.
type rerunner struct {
	cl    *client.Client
	g     *client.Graph
	model string
	// script, when --model is scripted:FILE, is FILE's replies, read here
	// and sent inline (workers never read a path from a spec).
	script []llm.ScriptReply
	// progress gets one line per re-applied version; may be io.Discard.
	progress io.Writer
	runs     map[string]api.Run
}

// firstParentPath returns the versions after from up to and including to,
// oldest first, following each version's first parent from to. It is an
// error naming both versions when from is not on that path.
func (r *rerunner) firstParentPath(ctx context.Context, from, to session.ID) ([]*session.Version, error) {
	if _, err := r.g.Get(ctx, from); err != nil {
		return nil, fmt.Errorf("--from %s: %w", from, err)
	}
	v, err := r.g.Get(ctx, to)
	if err != nil {
		return nil, fmt.Errorf("version %s: %w", to, err)
	}
	if from == to {
		return nil, &exitError{code: 2, err: fmt.Errorf("--from %s is VERSION itself: nothing to rerun", from)}
	}
	var path []*session.Version
	for v.ID != from {
		if len(path) == maxRerunPath {
			return nil, fmt.Errorf("--from %s: not within %d first-parent steps of %s", from, maxRerunPath, to)
		}
		path = append(path, v)
		if len(v.Parents) == 0 {
			return nil, r.offPath(ctx, from, to)
		}
		if v, err = r.g.Get(ctx, v.Parents[0]); err != nil {
			return nil, fmt.Errorf("version %s: parent %s: %w", path[len(path)-1].ID, path[len(path)-1].Parents[0], err)
		}
	}
	for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
		path[i], path[j] = path[j], path[i]
	}
	return path, nil
}

// offPath explains why from is not on to's first-parent path.
func (r *rerunner) offPath(ctx context.Context, from, to session.ID) error {
	if ok, err := r.cl.IsAncestor(ctx, from, to); err == nil && ok {
		return fmt.Errorf("--from %s is an ancestor of %s only through a merge's second parent, not on its first-parent path; rerun from a version on that path", from, to)
	}
	return fmt.Errorf("--from %s is not on the first-parent path of %s (it is not one of the versions %s was made from)", from, to, to)
}

// plan decides, before anything is written, how each version of path is
// re-applied, so a path rerun cannot handle fails without a new branch.
func (r *rerunner) plan(ctx context.Context, path []*session.Version) ([]rerunItem, error) {
	items := make([]rerunItem, 0, len(path))
	for _, v := range path {
		it := rerunItem{v: v}
		switch v.Op {
		case session.OpAppend:
			it.action = rerunAppended
		case session.OpFork, session.OpPlace:
			it.action = rerunSkipped
		case session.OpStep:
			spec, queue, err := r.stepSpec(ctx, v)
			if err != nil {
				return nil, err
			}
			it.action, it.spec, it.queue = rerunRan, spec, queue
		default:
			return nil, fmt.Errorf("version %s (op %s) cannot be rerun yet: rerun re-applies appends and agent steps, and skips forks and placements", v.ID, v.Op)
		}
		items = append(items, it)
	}
	return items, nil
}

// stepSpec finds the agent spec of the step that committed v (the step's
// own target, else its run's), with --model applied, and the run's queue.
func (r *rerunner) stepSpec(ctx context.Context, v *session.Version) (agent.Spec, string, error) {
	stepID := v.Key
	if stepID == "" {
		stepID = v.Producer.Step
	}
	if v.Producer.Run == "" || stepID == "" {
		return agent.Spec{}, "", fmt.Errorf("version %s (op step) records no run or step, so its agent is unknown and it cannot be rerun", v.ID)
	}
	run, ok := r.runs[v.Producer.Run]
	if !ok {
		var err error
		if run, err = r.cl.GetRun(ctx, v.Producer.Run); err != nil {
			return agent.Spec{}, "", fmt.Errorf("version %s: run %s: %w", v.ID, v.Producer.Run, err)
		}
		r.runs[run.ID] = run
	}
	target := run.Target
	for _, st := range run.Steps {
		if (st.ID == stepID || st.ID == v.Producer.Step) && len(st.Target) > 0 {
			target = st.Target
		}
	}
	if len(target) == 0 || string(target) == "null" {
		return agent.Spec{}, "", fmt.Errorf("version %s: step %s of run %s records no target to rerun", v.ID, stepID, run.ID)
	}
	call, err := flow.ParseTarget(target)
	if err != nil {
		return agent.Spec{}, "", fmt.Errorf("version %s: step %s: target: %w", v.ID, stepID, err)
	}
	if call.Kind != flow.KindAgent {
		return agent.Spec{}, "", fmt.Errorf("version %s (op step) is a %s step, which cannot be rerun yet: only agent steps are", v.ID, call.Kind)
	}
	spec := call.Agent
	if r.model != "" {
		spec.Model = r.model
		if r.model != llm.ScriptedModel {
			spec.Script, spec.ScriptFile = nil, ""
		}
		if r.script != nil {
			spec.Script, spec.ScriptFile = r.script, ""
		}
		if err := spec.Validate(); err != nil {
			return agent.Spec{}, "", fmt.Errorf("--model %q for version %s: %w", r.model, v.ID, err)
		}
	}
	return spec, run.Queue, nil
}

// execute forks from and re-applies items onto the fork.
func (r *rerunner) execute(ctx context.Context, from session.ID, items []rerunItem) (api.RerunReport, error) {
	rep := api.RerunReport{From: from, Steps: []api.RerunRow{}}
	sg := apiGraph{r.cl}
	fork, err := sg.Fork(ctx, from)
	if err != nil {
		return rep, fmt.Errorf("fork %s: %w", from, err)
	}
	rep.Fork, rep.Head = fork.ID, fork.ID
	fmt.Fprintf(r.progress, "forked %s at %s\n", fork.ID, from)
	for i, it := range items {
		row := api.RerunRow{Original: it.v.ID, Op: it.v.Op, Action: it.action, Agent: it.v.Producer.Agent, Model: it.v.Producer.Model}
		switch it.action {
		case rerunAppended:
			in, err := sg.Append(ctx, rep.Head, it.v.Chunks)
			if err != nil {
				return rep, r.stopped(rep, it.v, fmt.Errorf("append: %w", err))
			}
			row.New = &in.ID
		case rerunRan:
			run, err := r.run(ctx, rep.Head, it)
			row.Run = run.ID
			if err != nil {
				return rep, r.stopped(rep, it.v, err)
			}
			out := *run.Output // r.run returns only succeeded runs with an output
			v, err := r.g.Get(ctx, out)
			if err != nil {
				return rep, r.stopped(rep, it.v, fmt.Errorf("output of run %s: %w", run.ID, err))
			}
			row.New, row.Agent, row.Model = &v.ID, v.Producer.Agent, v.Producer.Model
		}
		if row.New != nil {
			rep.Head = *row.New
		}
		rep.Steps = append(rep.Steps, row)
		fmt.Fprintf(r.progress, "%d/%d %s %s %s\n", i+1, len(items), it.action, it.v.Op, it.v.ID)
	}
	return rep, nil
}

// stopped wraps err with where the rerun stopped and the branch so far.
func (r *rerunner) stopped(rep api.RerunReport, v *session.Version, err error) error {
	return fmt.Errorf("rerun of version %s (op %s) failed; the new branch so far ends at %s: %w", v.ID, v.Op, rep.Head, err)
}

// run submits a run forwarding head through its item's spec and waits for it to
// end. A run that does not succeed is an error; when ctx ends first the run
// is canceled.
func (r *rerunner) run(ctx context.Context, head session.ID, it rerunItem) (api.Run, error) {
	spec, err := json.Marshal(it.spec)
	if err != nil {
		return api.Run{}, err
	}
	run, err := r.cl.SubmitAgent(ctx, api.SubmitRequest{Agent: spec, Session: head.String(), Queue: it.queue})
	if err != nil {
		return run, fmt.Errorf("submit: %w", err)
	}
	fmt.Fprintf(r.progress, "run %s: %s (%s) on %s\n", run.ID, it.spec.Name, it.spec.Model, head)
	id := run.ID
	if run, err = r.wait(ctx, id); err != nil {
		if ctx.Err() != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_, _ = r.cl.CancelRun(cctx, id) // best effort: ctx ended
		}
		return api.Run{ID: id}, fmt.Errorf("run %s: %w", id, err)
	}
	switch {
	case run.Status == api.RunWaiting:
		return run, fmt.Errorf("run %s is waiting for approval; rerun does not decide approvals (decide with rathctl approve|reject %s)", run.ID, run.ID)
	case run.Status != api.RunSucceeded:
		return run, fmt.Errorf("run %s %s: %s", run.ID, run.Status, run.Error)
	case run.Output == nil:
		return run, fmt.Errorf("run %s succeeded without an output", run.ID)
	}
	return run, nil
}

// wait follows the run's events until they end, then reads the run until
// it is terminal or waiting (events may be lost; the run record is the
// truth).
func (r *rerunner) wait(ctx context.Context, id string) (api.Run, error) {
	if err := r.cl.Watch(ctx, id, func(api.Event) error { return nil }); err != nil && ctx.Err() != nil {
		return api.Run{}, ctx.Err()
	}
	return r.cl.Settled(ctx, id)
}

func writeRerun(w io.Writer, rep api.RerunReport) error {
	fmt.Fprintf(w, "rerun of %s from %s: fork %s, new head %s\n", rep.Version, rep.From, rep.Fork, rep.Head)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ORIGINAL\tNEW\tOP\tACTION\tRUN\tAGENT\tMODEL")
	for _, s := range rep.Steps {
		n := "-"
		if s.New != nil {
			n = s.New.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Original, n, s.Op, s.Action, dash(s.Run), dash(s.Agent), dash(s.Model))
	}
	return tw.Flush()
}

func newRerunCmd(env *Env) *cobra.Command {
	var f lineageFlags
	var fromArg, model, runID string
	var agentFlags []string
	c := &cobra.Command{
		Use:   "rerun VERSION --from ANCESTOR [--model M] | rerun --run RUN --from STEP [--model M] [--agent NAME=spec.yaml]",
		Short: "fork at ANCESTOR and re-execute the path to VERSION with live models, on a new branch",
		Long: "rerun forks ANCESTOR (which must be on VERSION's first-parent path) and re-applies each version after it, in\n" +
			"order: appends are appended again, agent steps are submitted as new runs through the same agent spec (the\n" +
			"step's target, else its run's; --model overrides its model) and waited for, forks and placements are skipped.\n" +
			"Merges, compressions, selector steps and replays stop it with an error before anything is written. The\n" +
			"original branch is untouched. It works through a coordinator only (--server, $RATH_SERVER): the steps run as runs.\n\n" +
			"rerun --run RUN --from STEP reruns a workflow run the coordinator drives (a workflow file) from its step keyed STEP\n" +
			"(runs show RUN lists the keys), with live models, as a new run: the steps STEP's input descends from are kept as\n" +
			"committed (reused, not re-executed), every other step runs anew. --model M replaces every agent's model and\n" +
			"--agent NAME=spec.yaml (repeatable) replaces agent NAME of the workflow. It prints the new run's id; follow it\n" +
			"with runs show, runs watch or graph --run. The original run is untouched (POST /v1/runs/{id}/rerun).",
		Args: cobra.RangeArgs(0, 1),
		RunE: f.with(func(ctx context.Context, t target, args []string) error {
			if runID != "" {
				if len(args) != 0 {
					return &exitError{code: 2, err: errors.New("give VERSION or --run RUN, not both")}
				}
				return rerunRunCmd(ctx, env, t, f.output, runID, fromArg, model, agentFlags)
			}
			if len(agentFlags) > 0 {
				return &exitError{code: 2, err: errors.New("--agent goes with --run RUN (rerun VERSION takes --model only)")}
			}
			if len(args) != 1 {
				return &exitError{code: 2, err: errors.New("give VERSION (with --from ANCESTOR) or --run RUN (with --from STEP)")}
			}
			if fromArg == "" {
				return &exitError{code: 2, err: errors.New("--from ANCESTOR is required")}
			}
			version, err := parseID(args[0])
			if err != nil {
				return err
			}
			from, err := session.ParseID(fromArg)
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("--from: %w", err)}
			}
			if t.cl == nil {
				return &exitError{code: 2, err: errors.New("rerun runs its steps as runs of a coordinator: give --server (or $RATH_SERVER), not a store")}
			}
			r := &rerunner{cl: t.cl, g: t.cl.Graph(), model: model, progress: io.Discard, runs: map[string]api.Run{}}
			if file, ok := strings.CutPrefix(model, llm.ScriptedModel+":"); ok {
				if r.script, err = llm.LoadScript(file); err != nil {
					return fmt.Errorf("--model %s: %w", model, err)
				}
				r.model = llm.ScriptedModel
			}
			if f.output == "text" {
				r.progress = env.Err
			}
			path, err := r.firstParentPath(ctx, from, version)
			if err != nil {
				return err
			}
			items, err := r.plan(ctx, path)
			if err != nil {
				return err
			}
			rep, err := r.execute(ctx, from, items)
			if err != nil {
				return err
			}
			rep.Version = version
			if f.output == "json" {
				return (&printer{env: env}).json(rep)
			}
			return writeRerun(env.Out, rep)
		}),
	}
	f.register(c)
	c.Flags().StringVar(&fromArg, "from", "", "the ancestor to fork at (on VERSION's first-parent path); with --run, the key of the step to rerun from")
	c.Flags().StringVar(&runID, "run", "", "rerun this workflow run from --from STEP as a new run")
	c.Flags().StringArrayVar(&agentFlags, "agent", nil, "with --run: NAME=spec.yaml replaces the workflow's agent NAME (repeatable)")
	c.Flags().StringVar(&model, "model", "", "run every re-executed step with this model instead of its spec's (scripted:FILE: the scripted model with FILE's replies, read by rathctl)")
	return c
}

// rerunRunCmd reruns workflow run runID from step from through the
// coordinator and prints the new run.
func rerunRunCmd(ctx context.Context, env *Env, t target, output, runID, from, model string, agentFlags []string) error {
	if from == "" {
		return &exitError{code: 2, err: errors.New("--from STEP is required (runs show RUN lists the step keys)")}
	}
	if t.cl == nil {
		return &exitError{code: 2, err: errors.New("rerun --run re-executes the workflow on a coordinator: give --server (or $RATH_SERVER), not a store")}
	}
	req := api.RunRerunRequest{From: from, Model: model}
	if file, ok := strings.CutPrefix(model, llm.ScriptedModel+":"); ok {
		// The scripted model with FILE's replies, read here: every agent
		// of the run's workflow is sent as its spec with model scripted
		// and these replies (--agent replacements below still win).
		agents, err := scriptedAgents(ctx, t.cl, runID, file)
		if err != nil {
			return fmt.Errorf("--model %s: %w", model, err)
		}
		req.Model, req.Agents = "", agents
	}
	for _, a := range agentFlags {
		name, path, ok := strings.Cut(a, "=")
		if !ok || name == "" || path == "" {
			return &exitError{code: 2, err: fmt.Errorf("--agent %q: want NAME=spec.yaml", a)}
		}
		spec, err := LoadAgentSpec(path)
		if err != nil {
			return fmt.Errorf("--agent %s: %w", name, err)
		}
		b, err := json.Marshal(spec)
		if err != nil {
			return err
		}
		if req.Agents == nil {
			req.Agents = map[string]json.RawMessage{}
		}
		req.Agents[name] = b
	}
	run, err := t.cl.RerunRun(ctx, runID, req)
	if err != nil {
		return err
	}
	if output == "json" {
		return (&printer{env: env}).json(run)
	}
	kept := 0
	for _, st := range run.Steps {
		if st.Status == api.StepCommitted {
			kept++
		}
	}
	fmt.Fprintf(env.Out, "rerun of run %s from step %s: new run %s (%d steps kept)\n", runID, from, run.ID, kept)
	return nil
}

// scriptedAgents returns every agent of workflow run runID as a JSON spec
// with the scripted model and the replies of script file file.
func scriptedAgents(ctx context.Context, cl *client.Client, runID, file string) (map[string]json.RawMessage, error) {
	replies, err := llm.LoadScript(file)
	if err != nil {
		return nil, err
	}
	run, err := cl.GetRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	if run.Workflow == "" {
		return nil, fmt.Errorf("run %s has no workflow file: rerun --run reruns a workflow run the coordinator drives", runID)
	}
	f, err := flowfile.Parse("workflow", []byte(run.Workflow), nil)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", runID, err)
	}
	out := make(map[string]json.RawMessage, len(f.AgentOrder))
	for _, name := range f.AgentOrder {
		spec := f.Agents[name].Spec
		spec.Model, spec.Provider, spec.Script = llm.ScriptedModel, "", replies
		b, err := json.Marshal(spec)
		if err != nil {
			return nil, err
		}
		out[name] = b
	}
	return out, nil
}
