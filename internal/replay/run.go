package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
)

// MaxRunSteps bounds the steps a whole-run replay re-executes.
const MaxRunSteps = 10_000

// Step kinds a whole-run replay reports besides flow's call kinds.
const (
	// KindMerge is a fan-in merge of the run, rebuilt from the graph.
	KindMerge = "merge"
)

// RunStep is one recorded step of a workflow run, as a whole-run replay
// needs it: its key, its call (the step's target), its input and the
// version it committed.
type RunStep struct {
	Key    string
	Call   flow.Call
	Input  session.ID
	Output session.ID
}

// RecordedRun is what a whole-run replay reads of a run: its id, its input
// (the version everything the run made descends from), its output (the
// version its driver completed it with; nil when it did not succeed) and
// its committed steps in the order they were recorded (their ordinals),
// which is a dependency order: a step is recorded once its input exists.
type RecordedRun struct {
	ID     string
	Input  session.ID
	Output *session.ID
	Steps  []RunStep
}

// LoadRun reads run id from rs as a [RecordedRun]: a workflow run whose
// committed steps record their targets. Steps that did not commit are
// skipped (they made no version); a committed step without a target, or
// one whose target does not parse, is ErrNotReplayable.
func LoadRun(ctx context.Context, rs *runs.Store, id string) (RecordedRun, error) {
	r, err := rs.Get(ctx, id)
	if err != nil {
		return RecordedRun{}, fmt.Errorf("replay: run %s: %w", id, err)
	}
	if r.Kind != runs.KindWorkflow {
		return RecordedRun{}, fmt.Errorf("replay: run %s is an agent run; replay its output version instead (rathctl replay VERSION): %w", id, ErrNotReplayable)
	}
	rec := RecordedRun{ID: r.ID, Input: r.Input, Output: r.Output}
	for _, st := range r.Steps {
		if st.Status != runs.StepCommitted || st.Output == nil {
			continue
		}
		if len(rec.Steps) == MaxRunSteps {
			return RecordedRun{}, fmt.Errorf("replay: run %s has more than %d committed steps", id, MaxRunSteps)
		}
		call, err := flow.ParseTarget(st.Target)
		if err != nil {
			return RecordedRun{}, fmt.Errorf("replay: run %s: step %s: target: %w: %w", id, st.Key, ErrNotReplayable, err)
		}
		rec.Steps = append(rec.Steps, RunStep{Key: st.Key, Call: call, Input: st.Input, Output: *st.Output})
	}
	if len(rec.Steps) == 0 {
		return RecordedRun{}, fmt.Errorf("replay: run %s committed no step: %w", id, ErrNotReplayable)
	}
	return rec, nil
}

// Run re-executes every step of a recorded workflow run into a new replay
// branch of g, in the order the steps were recorded, and compares what
// each step produces with what it recorded, chunk hash by chunk hash. No
// model is called and no tool runs:
//
//   - an agent step answers its model calls from its recorded replies
//     (pkg/llm Replay, strict when opts.Strict) and its tool calls with its
//     recorded results, and commits an op replay version ("replay.of");
//   - a selector step is answered with its recorded reply (the
//     selector_decision chunk's reply) and a compressor step with its
//     recorded summary, each through [flow.Execute], exactly one model
//     call each;
//   - a rollout's verify step appends its recorded score chunk again (the
//     verifier's command does not run);
//   - the versions between steps — a fan-out's forks, fan-in merges, what
//     the workflow appended, placements — are rebuilt from the graph on
//     the replayed versions: a merge of the replayed branches, a fork of
//     the replayed base, the same chunks appended.
//
// A step's input is mapped onto the replay branch: versions the run did
// not make (its input and what it descends from) are used as they are,
// versions it made are replaced by their replays. The original run and
// its versions are untouched.
//
// With opts.Strict the first difference stops the replay with an error
// wrapping ErrDiverged that names the step key, the round and the message
// (or chunk); the report holds the steps replayed until then.
func Run(ctx context.Context, g session.Graph, rec RecordedRun, opts Options) (api.RunReplayReport, error) {
	rep := api.RunReplayReport{Run: rec.ID, Output: rec.Output, Identical: true, Steps: []api.RunReplayRow{}}
	rr := &runReplayer{g: g, rec: rec, opts: opts, mapped: map[session.ID]session.ID{}, made: map[session.ID]bool{}, rep: &rep}
	for _, st := range rec.Steps {
		rr.made[st.Output] = true
	}
	for _, st := range rec.Steps {
		if err := rr.step(ctx, st); err != nil {
			return rep, err
		}
	}
	if rec.Output != nil {
		out, err := rr.mapVersion(ctx, *rec.Output, 0)
		if err != nil {
			return rep, err
		}
		rep.Replay = &out
	}
	return rep, nil
}

// maxMapDepth bounds how far [runReplayer.mapVersion] follows parents.
const maxMapDepth = 100_000

type runReplayer struct {
	g    session.Graph
	rec  RecordedRun
	opts Options
	// mapped maps an original version to its replay (itself for versions
	// the run did not make).
	mapped map[session.ID]session.ID
	// made holds the outputs of the run's steps.
	made map[session.ID]bool
	rep  *api.RunReplayReport
}

// diverged records a row's divergences in the report and, when strict,
// returns the error that stops the replay.
func (rr *runReplayer) record(row api.RunReplayRow) error {
	row.Identical = len(row.Divergences) == 0
	rr.rep.Steps = append(rr.rep.Steps, row)
	if row.Identical {
		return nil
	}
	rr.rep.Identical = false
	if rr.rep.Diverged == "" {
		rr.rep.Diverged = fmt.Sprintf("step %s (%s): %s", row.Key, row.Kind, row.Divergences[0])
	}
	if rr.opts.Strict {
		return fmt.Errorf("%w: %s", ErrDiverged, rr.rep.Diverged)
	}
	return nil
}

// step replays one recorded step onto the mapped input.
func (rr *runReplayer) step(ctx context.Context, st RunStep) error {
	inID, err := rr.mapVersion(ctx, st.Input, 0)
	if err != nil {
		return fmt.Errorf("replay: step %s: input: %w", st.Key, err)
	}
	in, err := session.Open(ctx, rr.g, inID)
	if err != nil {
		return fmt.Errorf("replay: step %s: input %s: %w", st.Key, inID, err)
	}
	orig, err := rr.g.Get(ctx, st.Output)
	if err != nil {
		return fmt.Errorf("replay: step %s: output %s: %w", st.Key, st.Output, err)
	}
	row := api.RunReplayRow{Key: st.Key, Kind: string(st.Call.Kind), Original: orig.ID, Divergences: []string{}}
	var out session.Session
	switch st.Call.Kind {
	case flow.KindAgent:
		out, err = rr.agentStep(ctx, st, in, orig, &row)
	case flow.KindSelect, flow.KindCompress:
		out, err = rr.oneShot(ctx, st, in, orig, &row)
	case flow.KindVerify:
		out, err = rr.verifyStep(ctx, in, orig)
	default:
		err = fmt.Errorf("step kind %q: %w", st.Call.Kind, ErrNotReplayable)
	}
	if err != nil {
		if errors.Is(err, ErrDiverged) {
			return errors.Join(rr.record(row), err)
		}
		return fmt.Errorf("replay: step %s: %w", st.Key, err)
	}
	id := out.ID()
	row.Replay = &id
	rr.mapped[orig.ID] = id
	row.Divergences = append(row.Divergences, compareChunks(out.Version().Chunks, orig.Chunks, orig.Len)...)
	row.Chunks = len(out.Version().Chunks)
	return rr.record(row)
}

// agentStep replays an agent step: recorded replies, recorded tool results.
func (rr *runReplayer) agentStep(ctx context.Context, st RunStep, in session.Session, orig *session.Version, row *api.RunReplayRow) (session.Session, error) {
	if orig.Base == nil {
		return session.Session{}, fmt.Errorf("version %s records no input: %w", orig.ID, ErrNotReplayable)
	}
	// The replies were recorded for the step's original input: a replayed
	// input that differs is a divergence, not a new recording.
	input, err := rr.g.Transcript(ctx, *orig.Base)
	if err != nil {
		return session.Session{}, fmt.Errorf("recorded input %s: %w", *orig.Base, err)
	}
	res, divs, err := runAgent(ctx, st.Call.Agent, in, input, orig, orig.Chunks, rr.opts.Strict)
	row.Divergences = append(row.Divergences, divs...)
	if err != nil {
		return session.Session{}, err
	}
	prod := orig.Producer
	prod.Worker = rr.opts.Worker
	return in.Extend(ctx, session.Extension{Op: session.OpReplay, Chunks: res.Chunks, Usage: res.Usage, Producer: prod,
		Extras: []session.Extra{session.StringExtra("replay.of", orig.ID.String())}})
}

// verifyStep replays a rollout's verify step from its recording: the
// score chunk it committed is appended again on the replayed branch, like
// a recorded tool result. The verifier's command does not run again.
func (rr *runReplayer) verifyStep(ctx context.Context, in session.Session, orig *session.Version) (session.Session, error) {
	if _, err := flow.ScoreOf(session.Wrap(nil, orig)); err != nil {
		return session.Session{}, fmt.Errorf("recorded score: %w: %w", ErrNotReplayable, err)
	}
	prod := orig.Producer
	prod.Worker = rr.opts.Worker
	extras := append(slices.Clone(orig.Extras), session.StringExtra("replay.of", orig.ID.String()))
	return in.Extend(ctx, session.Extension{Op: session.OpReplay, Chunks: orig.Chunks, Producer: prod, Extras: extras})
}

// oneShot replays a selector or compressor step through flow.Execute,
// answering its one model call with the recorded reply.
func (rr *runReplayer) oneShot(ctx context.Context, st RunStep, in session.Session, orig *session.Version, row *api.RunReplayRow) (session.Session, error) {
	reply, usage, err := recordedReply(st.Call.Kind, orig)
	if err != nil {
		return session.Session{}, err
	}
	if st.Call.Kind == flow.KindSelect && len(orig.Parents) == 1 {
		// A decision's usage is what its version added to its input's.
		if parent, err := rr.g.Get(ctx, orig.Parents[0]); err == nil {
			usage = orig.Usage.Sub(parent.Usage)
		}
	}
	p := &recordedProvider{reply: llm.Response{Content: reply, Model: orig.Producer.Model, FinishReason: llm.FinishStop, Usage: usage}}
	prod := orig.Producer
	prod.Worker = rr.opts.Worker
	env := flow.Env{
		Resolve:  func(agent.Spec) (llm.Provider, string, error) { return p, orig.Producer.Model, nil },
		Producer: prod,
	}
	var out session.Session
	if st.Call.Kind == flow.KindSelect {
		out, err = replaySelect(ctx, env, st.Call, in, orig)
	} else {
		out, err = flow.Execute(ctx, env, "", st.Call, in)
	}
	if err != nil {
		return session.Session{}, err
	}
	if len(orig.Parents) > 0 {
		if d, err := diffInputs(ctx, rr.g, in.ID(), orig.Parents[0]); err != nil {
			return session.Session{}, err
		} else if d != "" {
			row.Divergences = append(row.Divergences, "round 1: "+d)
		}
	}
	if p.calls != 1 {
		row.Divergences = append(row.Divergences, fmt.Sprintf("round 1: the step made %d model calls, the recording has 1", p.calls))
	}
	return out, nil
}

// replaySelect executes a select call on a scratch copy of in's
// transcript and commits what it appended on in as an op replay version
// ("replay.of" orig): the decision chunk, its usage and extras. A replayed
// decision is thus not a second commit of the original's step.
func replaySelect(ctx context.Context, env flow.Env, call flow.Call, in session.Session, orig *session.Version) (session.Session, error) {
	chunks, err := in.Chunks(ctx)
	if err != nil {
		return session.Session{}, err
	}
	scratch, err := session.New(ctx, session.NewMemoryGraph(), chunks...)
	if err != nil {
		return session.Session{}, fmt.Errorf("scratch copy of the input: %w", err)
	}
	out, err := flow.Execute(ctx, env, "", call, scratch)
	if err != nil {
		return session.Session{}, err
	}
	v := out.Version()
	extras := append(slices.Clone(v.Extras), session.StringExtra("replay.of", orig.ID.String()))
	return in.Extend(ctx, session.Extension{Op: session.OpReplay, Chunks: v.Chunks, Usage: v.Usage.Sub(scratch.Usage()),
		Producer: v.Producer, Extras: extras})
}

// recordedReply returns the model reply a selector or compressor step
// recorded: the selector_decision's reply, or the summary's content.
func recordedReply(kind flow.Kind, v *session.Version) (string, session.Usage, error) {
	var usage session.Usage
	for _, e := range v.Extras {
		if e.Key == "compression.usage" {
			_ = json.Unmarshal(e.Value, &usage) // usage only; a bad value replays as zero
		}
	}
	switch kind {
	case flow.KindSelect:
		d, err := flow.DecisionOf(session.Wrap(nil, v))
		if err != nil {
			return "", usage, fmt.Errorf("recorded decision: %w: %w", ErrNotReplayable, err)
		}
		return d.Reply, usage, nil
	default:
		for _, c := range v.Chunks {
			if c.Kind() == session.KindSummary {
				var body struct {
					Content string `json:"content"`
				}
				if err := json.Unmarshal(c.Payload(), &body); err != nil {
					return "", usage, fmt.Errorf("recorded summary: %w: %w", ErrNotReplayable, err)
				}
				return body.Content, usage, nil
			}
		}
		return "", usage, fmt.Errorf("version %s records no summary: %w", v.ID, ErrNotReplayable)
	}
}

// mapVersion returns the replay of original version id: itself when the
// run did not make it, else the version rebuilt on its replayed parents.
func (rr *runReplayer) mapVersion(ctx context.Context, id session.ID, depth int) (session.ID, error) {
	if m, ok := rr.mapped[id]; ok {
		return m, nil
	}
	if id == rr.rec.Input {
		return id, nil
	}
	if rr.made[id] {
		return session.ID{}, fmt.Errorf("version %s is the output of a step not replayed yet (steps out of dependency order)", id)
	}
	if depth > maxMapDepth {
		return session.ID{}, fmt.Errorf("version %s: more than %d versions deep", id, maxMapDepth)
	}
	v, err := rr.g.Get(ctx, id)
	if err != nil {
		return session.ID{}, err
	}
	parents := make([]session.ID, len(v.Parents))
	same := true
	for i, p := range v.Parents {
		if parents[i], err = rr.mapVersion(ctx, p, depth+1); err != nil {
			return session.ID{}, err
		}
		same = same && parents[i] == p
	}
	if same {
		rr.mapped[id] = id
		return id, nil
	}
	out, err := rr.rebuild(ctx, v, parents)
	if err != nil {
		return session.ID{}, fmt.Errorf("version %s (op %s): %w", v.ID, v.Op, err)
	}
	rr.mapped[id] = out
	return out, nil
}

// rebuild commits v's operation again on its replayed parents.
func (rr *runReplayer) rebuild(ctx context.Context, v *session.Version, parents []session.ID) (session.ID, error) {
	first, err := session.Open(ctx, rr.g, parents[0])
	if err != nil {
		return session.ID{}, err
	}
	var out session.Session
	switch {
	case v.Op == session.OpFork && len(parents) == 1:
		out, err = first.Fork(ctx)
	case v.Op == session.OpPlace && len(parents) == 1:
		out, err = first.To(ctx, v.Placement)
	case v.Op == session.OpAppend && len(parents) == 1:
		out, err = first.Extend(ctx, session.Extension{Op: session.OpAppend, Chunks: v.Chunks, Producer: v.Producer, Extras: v.Extras})
	case v.Op == session.OpMerge && len(parents) == 2:
		second, err2 := session.Open(ctx, rr.g, parents[1])
		if err2 != nil {
			return session.ID{}, err2
		}
		out, err = first.MergeKeyed(ctx, second, flow.MergeKey(first.ID(), second.ID()))
		if err == nil {
			row := api.RunReplayRow{Key: v.Key, Kind: KindMerge, Original: v.ID, Divergences: []string{}}
			id := out.ID()
			row.Replay, row.Chunks = &id, len(out.Version().Chunks)
			row.Divergences = compareChunks(out.Version().Chunks, v.Chunks, v.Len)
			if rerr := rr.record(row); rerr != nil {
				return session.ID{}, rerr
			}
		}
	default:
		return session.ID{}, fmt.Errorf("a version of op %s with %d parents inside a run cannot be replayed: %w", v.Op, len(parents), ErrNotReplayable)
	}
	if err != nil {
		return session.ID{}, err
	}
	return out.ID(), nil
}

// compareChunks lists where got, the chunks a replay appended, differs
// from want, the recorded ones (of a version of length n), naming each
// chunk's index in the transcript and its round: 1 + the assistant chunks
// recorded before it.
func compareChunks(got, want []session.Chunk, n int) []string {
	var out []string
	base := n - len(want)
	round := func(i int) int {
		r := 1
		for j := 0; j < i && j < len(want); j++ {
			if want[j].Kind() == session.KindAssistant {
				r++
			}
		}
		return r
	}
	for i := range max(len(got), len(want)) {
		switch {
		case i >= len(got):
			out = append(out, fmt.Sprintf("round %d: message %d (%s): recorded, not produced", round(i), base+i, want[i].Kind()))
		case i >= len(want):
			out = append(out, fmt.Sprintf("round %d: message %d (%s): produced, not recorded", round(i), base+i, got[i].Kind()))
		case got[i].Hash() != want[i].Hash():
			out = append(out, fmt.Sprintf("round %d: message %d (%s): hash %s, recorded %s", round(i), base+i, got[i].Kind(), got[i].Hash(), want[i].Hash()))
		}
	}
	if out == nil {
		return []string{}
	}
	return out
}

// recordedProvider answers every call with one recorded reply.
type recordedProvider struct {
	reply llm.Response
	calls int
}

func (p *recordedProvider) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	return p.ChatStream(ctx, req, nil)
}

func (p *recordedProvider) ChatStream(ctx context.Context, _ llm.Request, onDelta func(string)) (llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return llm.Response{}, err
	}
	p.calls++
	if onDelta != nil {
		onDelta(p.reply.Content)
	}
	return p.reply, nil
}

// diffInputs describes how the transcript of got, a replayed step's input,
// differs from want's, the recorded input's; "" when they are the same.
func diffInputs(ctx context.Context, g session.Graph, got, want session.ID) (string, error) {
	gc, err := g.Transcript(ctx, got)
	if err != nil {
		return "", fmt.Errorf("input %s: %w", got, err)
	}
	wc, err := g.Transcript(ctx, want)
	if err != nil {
		return "", fmt.Errorf("recorded input %s: %w", want, err)
	}
	for i := range min(len(gc), len(wc)) {
		if gc[i].Hash() != wc[i].Hash() {
			return fmt.Sprintf("input message %d (%s) differs from the recording's (%s)", i, gc[i].Kind(), wc[i].Kind()), nil
		}
	}
	if len(gc) != len(wc) {
		return fmt.Sprintf("the input has %d messages, the recording's had %d", len(gc), len(wc)), nil
	}
	return "", nil
}
