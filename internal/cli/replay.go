package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/tool"
)

// replayReport is what `rathctl replay` found.
type replayReport struct {
	// Of is the replayed step version; Replay the new version (op replay,
	// parent the step's input), absent when a strict replay diverged.
	Of     session.ID  `json:"of"`
	Replay *session.ID `json:"replay,omitempty"`
	// Identical says every chunk hash (and so the transcript) came out the
	// same; Divergences lists where not.
	Identical   bool     `json:"identical"`
	Chunks      int      `json:"chunks"`
	Divergences []string `json:"divergences"`
}

// errReplayDiverged is returned for a strict replay that did not reproduce
// the recording.
var errReplayDiverged = errors.New("replay diverged from the recording")

// replayStep re-executes the agent step that committed out, answering its
// model calls from recording (out's own chunks when nil) and its tool calls
// with the tool results recorded in out (no tool runs again: a replay never
// repeats a side effect). The result is committed as an op replay version
// on the step's input, unless strict and anything diverged.
func replayStep(ctx context.Context, g session.Graph, spec agent.Spec, out session.Session, recording []session.Chunk, strict bool) (replayReport, error) {
	v := out.Version()
	rep := replayReport{Of: v.ID, Divergences: []string{}}
	if err := replayable(v); err != nil {
		return rep, err
	}
	in, err := session.Open(ctx, g, *v.Base)
	if err != nil {
		return rep, fmt.Errorf("replay: input of %s: %w", v.ID, err)
	}
	input, err := in.Chunks(ctx)
	if err != nil {
		return rep, err
	}
	if recording == nil {
		recording = v.Chunks
	}
	opts := llm.ReplayOptions{Lenient: !strict, Model: v.Producer.Model}
	for _, e := range v.Extras {
		if e.Key == "loop.round_usage" {
			_ = json.Unmarshal(e.Value, &opts.RoundUsage) // usage only; a bad value replays as zero
		}
	}
	provider, err := llm.NewReplay(input, recording, opts)
	if err != nil {
		return rep, fmt.Errorf("replay: %w", err)
	}
	tools, err := recordedTools(recording)
	if err != nil {
		return rep, err
	}
	spec.Memory = agent.MemorySpec{} // recall is in the recording; the store is not asked again
	a := &agent.Agent{Spec: spec, Provider: provider, Model: v.Producer.Model, Tools: tools}
	res, err := a.Run(ctx, in, agent.Meta{Producer: v.Producer})
	if err == nil {
		err = provider.Verify()
	}
	if err != nil {
		rep.Divergences = append(rep.Divergences, err.Error())
		if strict {
			return rep, fmt.Errorf("%w: %w", errReplayDiverged, err)
		}
	}
	rep.Chunks = len(res.Chunks)
	for i := range max(len(res.Chunks), len(v.Chunks)) {
		switch {
		case i >= len(res.Chunks):
			rep.Divergences = append(rep.Divergences, fmt.Sprintf("chunk %d (%s): recorded, not produced", v.Len-len(v.Chunks)+i, v.Chunks[i].Kind()))
		case i >= len(v.Chunks):
			rep.Divergences = append(rep.Divergences, fmt.Sprintf("chunk %d (%s): produced, not recorded", v.Len-len(v.Chunks)+i, res.Chunks[i].Kind()))
		case res.Chunks[i].Hash() != v.Chunks[i].Hash():
			rep.Divergences = append(rep.Divergences, fmt.Sprintf("chunk %d (%s): hash %s, recorded %s", v.Len-len(v.Chunks)+i,
				res.Chunks[i].Kind(), res.Chunks[i].Hash(), v.Chunks[i].Hash()))
		}
	}
	rep.Identical = len(rep.Divergences) == 0
	if strict && !rep.Identical {
		return rep, fmt.Errorf("%w: %s", errReplayDiverged, rep.Divergences[0])
	}
	prod := v.Producer
	prod.Worker = "rathctl-replay"
	s, err := in.Extend(ctx, session.Extension{Op: session.OpReplay, Chunks: res.Chunks, Usage: res.Usage, Producer: prod,
		Extras: []session.Extra{session.StringExtra("replay.of", v.ID.String())}})
	if err != nil {
		return rep, fmt.Errorf("replay: commit: %w", err)
	}
	id := s.ID()
	rep.Replay = &id
	return rep, nil
}

// replayable checks v was committed by a step.
func replayable(v *session.Version) error {
	if v.Op != session.OpStep || v.Base == nil || len(v.Parents) != 1 {
		return fmt.Errorf("replay: version %s was made by %s, not by an agent step", v.ID, v.Op)
	}
	return nil
}

// recordedTools returns one tool per tool name called in chunks, each
// answering with the result recorded for the call id.
func recordedTools(chunks []session.Chunk) (*tool.Set, error) {
	results := make(map[string]string)
	var names []string
	seen := make(map[string]bool)
	for _, c := range chunks {
		for _, tc := range c.ToolCalls() {
			if !seen[tc.Function.Name] {
				seen[tc.Function.Name] = true
				names = append(names, tc.Function.Name)
			}
		}
		if r, ok := c.ToolResult(); ok {
			results[r.ToolCallID] = r.Content
		}
	}
	ts := make([]tool.Tool, 0, len(names))
	for _, n := range names {
		ts = append(ts, recordedTool{name: n, results: results})
	}
	set, err := tool.NewSet(ts...)
	if err != nil {
		return nil, fmt.Errorf("replay: tools: %w", err)
	}
	return set, nil
}

// recordedTool answers calls with recorded results.
type recordedTool struct {
	name    string
	results map[string]string
}

func (t recordedTool) Def() tool.Def {
	return tool.Def{Name: t.name, Description: "replayed from the recording", Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (t recordedTool) ResourceKey(json.RawMessage) string { return "" }

func (t recordedTool) Call(ctx context.Context, _ tool.Env, _ json.RawMessage) (any, error) {
	r, ok := t.results[tool.CallID(ctx)]
	if !ok {
		return nil, fmt.Errorf("replay: no result recorded for call %q of %s", tool.CallID(ctx), t.name)
	}
	return json.RawMessage(r), nil
}

// specOf finds the agent spec of the step that committed v: the step's own
// target, else its run's.
func specOf(ctx context.Context, rs *runs.Store, v *session.Version) (agent.Spec, error) {
	if v.Key == "" {
		return agent.Spec{}, fmt.Errorf("replay: version %s records no step", v.ID)
	}
	st, err := rs.GetStep(ctx, v.Key)
	if err != nil {
		return agent.Spec{}, fmt.Errorf("replay: step %s: %w", v.Key, err)
	}
	target := st.Target
	if len(target) == 0 {
		run, err := rs.Get(ctx, st.RunID)
		if err != nil {
			return agent.Spec{}, fmt.Errorf("replay: run %s: %w", st.RunID, err)
		}
		target = run.Target
	}
	spec, err := agent.ParseSpec(target)
	if err != nil {
		return agent.Spec{}, fmt.Errorf("replay: step %s is not an agent step (only those replay): %w", v.Key, err)
	}
	return spec, nil
}

func newReplayCmd(env *Env) *cobra.Command {
	var f storeFlags
	var strict bool
	c := &cobra.Command{
		Use:   "replay VERSION",
		Short: "re-execute the agent step that made VERSION with its recorded model replies and tool results, into a new replay version, and compare hashes",
		Long: "replay answers the step's model calls from the recording (pkg/llm Replay) and its tool calls with the recorded\n" +
			"results, so no model is called and no tool runs again. The new version (op replay) branches from the step's input;\n" +
			"the original is untouched. --strict fails (exit 1, nothing committed) on any divergence.",
		Args: cobra.ExactArgs(1),
		RunE: f.withStore(func(ctx context.Context, st store.Store, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			out, err := session.Open(ctx, st, id)
			if err != nil {
				return err
			}
			rs, db, err := runs.Open(ctx, storeURLOf(f))
			if err != nil {
				return err
			}
			defer db.Close()
			if err := replayable(out.Version()); err != nil {
				return err
			}
			spec, err := specOf(ctx, rs, out.Version())
			if err != nil {
				return err
			}
			rep, err := replayStep(ctx, st, spec, out, nil, strict)
			if err != nil && !errors.Is(err, errReplayDiverged) {
				return err
			}
			if f.output == "json" {
				if perr := (&printer{env: env}).json(rep); perr != nil {
					return perr
				}
			} else {
				for _, d := range rep.Divergences {
					fmt.Fprintln(env.Out, "DIVERGED", d)
				}
				if rep.Replay != nil {
					fmt.Fprintf(env.Out, "replay %s of %s: %d chunks, identical=%v\n", rep.Replay, rep.Of, rep.Chunks, rep.Identical)
				}
			}
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			return nil
		}),
	}
	f.register(c)
	c.Flags().BoolVar(&strict, "strict", false, "fail on any divergence from the recording")
	return c
}
