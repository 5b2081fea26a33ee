// Package replay re-executes a recorded agent step: its model calls are
// answered from the recording (pkg/llm Replay) and its tool calls with the
// tool results recorded in the step's version, so no model is called and
// no tool runs again. rathctl (on a store) and the coordinator (POST
// /v1/versions/{id}/replay) both use it.
//
// [Run] replays a whole workflow run the same way, step by step in the
// order the steps were recorded, into a new replay branch: agent steps
// from their recorded replies and tool results, selector steps from their
// recorded decisions, compressions from their recorded summaries, and the
// forks and merges between them rebuilt from the graph (POST
// /v1/runs/{id}/replay, rathctl replay --run). [KeptSteps] and
// [OverrideWorkflow] prepare a rerun of a coordinator-driven workflow run
// from one of its steps as a new run (POST /v1/runs/{id}/rerun).
package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/tool"
)

// ErrDiverged is returned for a strict replay that did not reproduce the
// recording.
var ErrDiverged = errors.New("replay diverged from the recording")

// ErrNotReplayable marks a version that no agent step made (or whose step
// records no agent spec): there is nothing to replay.
var ErrNotReplayable = errors.New("not replayable")

// Options tune a replay.
type Options struct {
	// Strict commits nothing, and returns ErrDiverged, on any divergence.
	Strict bool
	// Worker is recorded as the replay version's producer worker.
	Worker string
}

// Step re-executes the agent step that committed out, answering its
// model calls from recording (out's own chunks when nil) and its tool calls
// with the tool results recorded in out (no tool runs again: a replay never
// repeats a side effect). The result is committed as an op replay version
// on the step's input, unless opts.Strict and anything diverged.
func Step(ctx context.Context, g session.Graph, spec agent.Spec, out session.Session, recording []session.Chunk, opts Options) (api.ReplayReport, error) {
	v := out.Version()
	rep := api.ReplayReport{Of: v.ID, Divergences: []string{}}
	if err := Replayable(v); err != nil {
		return rep, err
	}
	in, err := session.Open(ctx, g, *v.Base)
	if err != nil {
		return rep, fmt.Errorf("replay: input of %s: %w", v.ID, err)
	}
	if recording == nil {
		recording = v.Chunks
	}
	input, err := in.Chunks(ctx)
	if err != nil {
		return rep, err
	}
	res, divs, err := runAgent(ctx, spec, in, input, v, recording, opts.Strict)
	rep.Divergences = append(rep.Divergences, divs...)
	if err != nil {
		return rep, err
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
	if opts.Strict && !rep.Identical {
		return rep, fmt.Errorf("%w: %s", ErrDiverged, rep.Divergences[0])
	}
	prod := v.Producer
	prod.Worker = opts.Worker
	s, err := in.Extend(ctx, session.Extension{Op: session.OpReplay, Chunks: res.Chunks, Usage: res.Usage, Producer: prod,
		Extras: []session.Extra{session.StringExtra("replay.of", v.ID.String())}})
	if err != nil {
		return rep, fmt.Errorf("replay: commit: %w", err)
	}
	id := s.ID()
	rep.Replay = &id
	return rep, nil
}

// runAgent re-executes the agent step v on in, answering its model calls
// from recording (made on the transcript input) and its tool calls with
// the results recorded there: a strict replay diverges when the requests
// the agent makes on in are not the recorded ones. It
// returns what the agent produced and the divergences the replayed
// provider saw; with strict, a divergence is also the error (wrapping
// ErrDiverged).
func runAgent(ctx context.Context, spec agent.Spec, in session.Session, input []session.Chunk, v *session.Version, recording []session.Chunk, strict bool) (agent.Result, []string, error) {
	ropts := llm.ReplayOptions{Lenient: !strict, Model: v.Producer.Model}
	for _, e := range v.Extras {
		if e.Key == "loop.round_usage" {
			_ = json.Unmarshal(e.Value, &ropts.RoundUsage) // usage only; a bad value replays as zero
		}
	}
	provider, err := llm.NewReplay(input, recording, ropts)
	if err != nil {
		return agent.Result{}, nil, fmt.Errorf("replay: %w", err)
	}
	tools, err := recordedTools(recording)
	if err != nil {
		return agent.Result{}, nil, err
	}
	spec.Memory = agent.MemorySpec{} // recall is in the recording; the store is not asked again
	rounds := ropts.RoundUsage
	if len(rounds) == 0 { // recorded before round usage was: the step's usage as one round
		rounds = []session.Usage{v.Usage.Sub(in.Version().Usage)}
	}
	a := &agent.Agent{Spec: spec, Provider: provider, Model: v.Producer.Model, Tools: tools}
	res, err := a.Run(ctx, in, agent.Meta{Producer: v.Producer, Run: recordedRunBudget(recording, spec.Pricing, rounds)})
	if err == nil {
		err = provider.Verify()
	}
	var divs []string
	if err != nil {
		divs = append(divs, err.Error())
		if strict {
			return res, divs, fmt.Errorf("%w: %w", ErrDiverged, err)
		}
	}
	return res, divs, nil
}

// Replayable checks v was committed by a step; the error wraps
// ErrNotReplayable.
func Replayable(v *session.Version) error {
	if v.Op != session.OpStep || v.Base == nil || len(v.Parents) != 1 {
		return fmt.Errorf("replay: version %s was made by %s, not by an agent step: %w", v.ID, v.Op, ErrNotReplayable)
	}
	return nil
}

// SpecOf finds the agent spec of the step that committed v: the step's own
// target, else its run's. A version that records no agent step is
// ErrNotReplayable; a step or run not in rs wraps runs.ErrNotFound.
func SpecOf(ctx context.Context, rs *runs.Store, v *session.Version) (agent.Spec, error) {
	if v.Key == "" {
		return agent.Spec{}, fmt.Errorf("replay: version %s records no step: %w", v.ID, ErrNotReplayable)
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
	// A bare spec (an agent run's) or a call envelope (a workflow's step).
	call, err := flow.ParseTarget(target)
	if err != nil {
		return agent.Spec{}, fmt.Errorf("replay: step %s is not an agent step (only those replay): %w: %w", v.Key, ErrNotReplayable, err)
	}
	if call.Kind != flow.KindAgent {
		return agent.Spec{}, fmt.Errorf("replay: step %s is a %s step, not an agent step (only those replay alone; replay --run replays its run): %w", v.Key, call.Kind, ErrNotReplayable)
	}
	return call.Agent, nil
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

// recordedRunBudget returns the run budget a step that the run's budget
// stopped saw, read back from the stop's note (its used and limit) and the
// step's own rounds, so that its replay stops after the same round: what
// the run had used before the step is the note's used less what the
// step's rounds used (summed as the loop sums them). A step no run budget
// stopped gets none (it had room for every round it made).
func recordedRunBudget(recording []session.Chunk, pricing agent.Pricing, rounds []session.Usage) agent.Budget {
	for _, c := range recording {
		if c.Kind() != session.KindNote {
			continue
		}
		var n struct {
			Event  string  `json:"event"`
			Budget string  `json:"budget"`
			Used   float64 `json:"used"`
			Limit  float64 `json:"limit"`
		}
		if json.Unmarshal(c.Payload(), &n) != nil || n.Event != "budget.exceeded" {
			continue
		}
		var tokens int64
		var cost float64
		for _, u := range rounds {
			tokens += u.TotalTokens
			cost += pricing.Cost(u)
		}
		switch n.Budget {
		case agent.StopRunTokens:
			return agent.Budget{MaxTokens: int64(n.Limit), UsedTokens: int64(n.Used) - tokens}
		case agent.StopRunCost:
			return agent.Budget{MaxCostUSD: n.Limit, UsedCostUSD: n.Used - cost}
		}
	}
	return agent.Budget{}
}
