package worker

import (
	"context"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/session"
)

// StepCommitter commits a step's version and records the step committed in
// one transaction (runs.Store.CommitStepVersion over a Postgres graph
// store). A worker whose Steps offers it and whose graph can run
// statements in a commit (runs.VersionPutter) uses it: one fsync'd commit
// per step instead of two.
type StepCommitter interface {
	CommitStepVersion(ctx context.Context, g runs.VersionPutter, stepID string, v *session.Version) (*session.Version, runs.Run, error)
	// CommitStepVersionNoJournal is CommitStepVersion for a step whose
	// journal holds nothing: it skips the prune.
	CommitStepVersionNoJournal(ctx context.Context, g runs.VersionPutter, stepID string, v *session.Version) (*session.Version, runs.Run, error)
}

// ExecStepCommitter is StepCommitter for a graph store that runs the
// caller's statements in its write transaction (runs.ExecPutter: SQLite);
// prune says whether the step's journal may hold entries to prune.
type ExecStepCommitter interface {
	CommitStepVersionExec(ctx context.Context, g runs.ExecPutter, stepID string, v *session.Version, prune bool) (*session.Version, runs.Run, error)
}

// commitFunc commits a step's version with the step's record; prune as
// for ExecStepCommitter.
type commitFunc func(ctx context.Context, v *session.Version, prune bool) (*session.Version, runs.Run, error)

// stepCommit returns how the worker commits step stepID's version with its
// record in one transaction, or nil when its stores cannot.
func (w *Worker) stepCommit(stepID string) commitFunc {
	switch g := w.graph.(type) {
	case runs.VersionPutter:
		c, ok := w.steps.(StepCommitter)
		if !ok {
			return nil
		}
		return func(ctx context.Context, v *session.Version, prune bool) (*session.Version, runs.Run, error) {
			if prune {
				return c.CommitStepVersion(ctx, g, stepID, v)
			}
			return c.CommitStepVersionNoJournal(ctx, g, stepID, v)
		}
	case runs.ExecPutter:
		c, ok := w.steps.(ExecStepCommitter)
		if !ok {
			return nil
		}
		return func(ctx context.Context, v *session.Version, prune bool) (*session.Version, runs.Run, error) {
			return c.CommitStepVersionExec(ctx, g, stepID, v, prune)
		}
	}
	return nil
}

// stepGraph is the graph one step's session runs on. Every call goes to the
// worker's graph, except the commit of the version keyed by the step id
// (the step's result: agent.Meta.Key, flow.Execute's key), which goes
// through the StepCommitter together with the step's record; run then
// holds the run as the commit left it, and the worker skips CommitStep.
type stepGraph struct {
	session.Graph
	commit commitFunc
	stepID string
	run    *runs.Run
	// plain: commit the step's version with a plain Put, because the step
	// does more after it (an agent committing memory), so the step is not
	// done when its version is.
	plain bool
	// span starts the "store commit" span of the step's version.
	span func(context.Context, string) (context.Context, func(error))
	// input is the step's input version; when the graph is an
	// inputLoader, Get reads it with its transcript, kept in
	// inputChunks for the step's Transcript of it.
	input       session.ID
	inputChunks []session.Chunk
	// epoch is the redaction epoch the step's start read (epochKnown):
	// an epochLoader reads the input without reading it again.
	epoch      int64
	epochKnown bool
	// attempt is the step's, as its start counted it; journal is the
	// step's journal, when it keeps one: a first attempt that recorded
	// nothing commits without pruning it.
	attempt int
	journal *stepJournal
}

// epochLoader is an inputLoader that can take the redaction epoch from
// the caller (pgstore.Store: the step's start read it in the same
// database).
type epochLoader interface {
	VersionAndTranscriptAt(ctx context.Context, id session.ID, epoch int64) (*session.Version, []session.Chunk, error)
}

// inputLoader reads a version and its transcript with one redaction-epoch
// check (pgstore.Store): a step opens its input and then reads its
// transcript, so one round trip less per step.
type inputLoader interface {
	VersionAndTranscript(ctx context.Context, id session.ID) (*session.Version, []session.Chunk, error)
}

// Get implements session.Graph: the step's input comes with its
// transcript when the graph can read both at once.
func (g *stepGraph) Get(ctx context.Context, id session.ID) (*session.Version, error) {
	l, ok := g.Graph.(inputLoader)
	if !ok || id != g.input || g.inputChunks != nil {
		return g.Graph.Get(ctx, id)
	}
	var v *session.Version
	var t []session.Chunk
	var err error
	if el, ok := g.Graph.(epochLoader); ok && g.epochKnown {
		v, t, err = el.VersionAndTranscriptAt(ctx, id, g.epoch)
	} else {
		v, t, err = l.VersionAndTranscript(ctx, id)
	}
	if err != nil {
		return nil, err
	}
	g.inputChunks = t
	return v, nil
}

// Transcript implements session.Graph: the input's, as Get read it.
func (g *stepGraph) Transcript(ctx context.Context, id session.ID) ([]session.Chunk, error) {
	if id == g.input && g.inputChunks != nil {
		return g.inputChunks, nil
	}
	return g.Graph.Transcript(ctx, id)
}

// graphFor returns the graph step stepID commits through: a stepGraph
// when the stores can record the step in the version's commit, else the
// worker's graph.
func (w *Worker) graphFor(job bus.Job, st runs.Step) (session.Graph, *stepGraph) {
	stepID := job.StepID
	commit := w.stepCommit(stepID)
	if commit == nil {
		return w.graph, nil
	}
	input, _ := session.ParseID(job.Input) // a bad input fails the step where it is opened
	g := &stepGraph{Graph: w.graph, commit: commit, stepID: stepID, input: input,
		epoch: st.RedactionEpoch, epochKnown: st.EpochKnown, attempt: st.Attempts,
		span: func(ctx context.Context, name string) (context.Context, func(error)) { return w.span(ctx, name, job) }}
	return g, g
}

// Put implements session.Graph.
func (g *stepGraph) Put(ctx context.Context, v *session.Version) (*session.Version, error) {
	if v == nil || v.Key != g.stepID || g.run != nil || g.plain || pausing(v) {
		return g.Graph.Put(ctx, v)
	}
	ctx, end := g.span(ctx, "store commit")
	got, r, err := g.commit(ctx, v, !g.journal.empty(g.attempt))
	end(err)
	if err != nil {
		return nil, err
	}
	g.run = &r
	return got, nil
}

// committed returns the run as the step's commit recorded it, if the
// commit went through the committer.
func (g *stepGraph) committed() (runs.Run, bool) {
	if g == nil || g.run == nil {
		return runs.Run{}, false
	}
	return *g.run, true
}

// pausing reports a version that pauses its step for approval: the step
// waits (WaitStep), it has not committed.
func pausing(v *session.Version) bool {
	for _, e := range v.Extras {
		if e.Key == agent.ExtraPending {
			return true
		}
	}
	return false
}

// commitsPlainly marks the step's graph, when s runs on one, to commit
// the step's version with a plain Put.
func commitsPlainly(s session.Session) {
	if g, ok := s.Graph().(*stepGraph); ok {
		g.plain = true
	}
}

// targets caches parsed job targets by their bytes: the jobs of one run,
// and of many runs of one agent, carry the same spec, and parsing and
// validating it costs more than the rest of an instant step's CPU in the
// worker. Parsed calls are only read, never changed, so they are shared.
type targets struct {
	cache *lru.Cache[string, flow.Call]
}

// targetCacheSize bounds the cache, in distinct targets.
const targetCacheSize = 512

func newTargets() *targets {
	c, err := lru.New[string, flow.Call](targetCacheSize)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return &targets{cache: c}
}

// parse returns raw's call, from the cache or flow.ParseTarget; errors are
// not cached.
func (t *targets) parse(raw []byte) (flow.Call, error) {
	if c, ok := t.cache.Get(string(raw)); ok {
		return c, nil
	}
	c, err := flow.ParseTarget(raw)
	if err != nil {
		return flow.Call{}, err
	}
	t.cache.Add(string(raw), c)
	return c, nil
}
