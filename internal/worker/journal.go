package worker

import (
	"cmp"
	"context"
	"sync/atomic"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/sandbox"
	"github.com/rath-run/rath/pkg/sandbox/local"
	"github.com/rath-run/rath/pkg/session"
)

// Journals is the part of the run store that keeps step journals
// (runs.Store). A worker whose Steps offers it journals every agent step
// (agent.Journal): a redelivered step resumes after its last recorded
// model reply and tool result instead of starting over, and its workspace
// starts from the snapshot recorded at the end of its last recorded round.
type Journals interface {
	AppendJournal(ctx context.Context, stepID string, es ...runs.JournalEntry) error
	LoadJournal(ctx context.Context, stepID string) ([]runs.JournalEntry, error)
}

// Crash points, for Config.CrashAt: where a fault test stops a worker
// dead in a step.
const (
	CrashBeforeReply  = "before_reply"  // a model reply, before it is recorded
	CrashAfterReply   = "after_reply"   // a model reply, after it is recorded
	CrashToolStarted  = "tool_started"  // a tool call recorded started, not run
	CrashToolResult   = "tool_result"   // a tool call's result recorded
	CrashBeforeCommit = "before_commit" // the loop ended, nothing committed
	CrashAfterCommit  = "after_commit"  // committed and recorded, not acked
)

// stepJournal is one step's journal in the run store. The entries are
// loaded once (the worker reads them before opening the workspace; the
// agent reads them again when its loop starts).
type stepJournal struct {
	w      *Worker
	store  Journals
	stepID string
	loaded []agent.JournalEntry
	// wrote: this delivery may have recorded an entry (set before the
	// write, which may land even when it reports an error).
	wrote atomic.Bool
}

// empty reports that the journal holds no entry, as far as this delivery
// can tell: on a first attempt it starts empty (see journalFor), and
// this delivery recorded nothing.
func (j *stepJournal) empty(attempt int) bool {
	return j != nil && attempt == 1 && !j.wrote.Load()
}

// journalFor returns step stepID's journal and what it holds, or nil when
// the run store keeps none. On the step's first attempt (StartStep counted
// 1) the journal is not read: it is empty, since only a started step's
// worker records in it (a review records only for a step that waits, after
// its start), and a recorded entry implies a durable start before it (the
// relaxed StartStep's commit precedes the entry's synchronous one in the
// WAL), so a step with a journal starts again with an attempt of 2 or more.
func (w *Worker) journalFor(ctx context.Context, stepID string, attempt int) (*stepJournal, error) {
	js, ok := w.steps.(Journals)
	if !ok {
		return nil, nil
	}
	j := &stepJournal{w: w, store: js, stepID: stepID}
	if attempt == 1 {
		return j, nil
	}
	es, err := js.LoadJournal(ctx, stepID)
	if err != nil {
		return nil, err
	}
	for _, e := range es {
		j.loaded = append(j.loaded, agent.JournalEntry{Round: e.Round, CallID: e.CallID, Kind: e.Kind, Worker: e.Worker, Data: e.Data})
	}
	return j, nil
}

// Load implements agent.Journal.
func (j *stepJournal) Load(context.Context) ([]agent.JournalEntry, error) { return j.loaded, nil }

// Record implements agent.Journal.
func (j *stepJournal) Record(ctx context.Context, es ...agent.JournalEntry) error {
	if len(es) == 0 {
		return nil
	}
	e := es[len(es)-1] // the entry the write is for; the others ride along
	if e.Kind == agent.JournalReply {
		j.w.crash(CrashBeforeReply, e.Round)
	}
	rs := make([]runs.JournalEntry, len(es))
	for i, e := range es {
		rs[i] = runs.JournalEntry{Round: e.Round, CallID: e.CallID, Kind: e.Kind, Worker: e.Worker, Data: e.Data}
	}
	j.wrote.Store(true)
	if err := j.store.AppendJournal(ctx, j.stepID, rs...); err != nil {
		return err
	}
	switch e.Kind {
	case agent.JournalReply:
		j.w.crash(CrashAfterReply, e.Round)
	case agent.JournalStart:
		j.w.crash(CrashToolStarted, e.Round)
	case agent.JournalResult:
		j.w.crash(CrashToolResult, e.Round)
	}
	return nil
}

// crash calls Config.CrashAt, if set.
func (w *Worker) crash(point string, round int) {
	if w.cfg.CrashAt != nil {
		w.cfg.CrashAt(point, round)
	}
}

// CheckpointWorkspaces is a [Workspaces] that can snapshot a workspace
// between rounds and open one from such a snapshot ([SnapshotWorkspaces]).
type CheckpointWorkspaces interface {
	// OpenFrom is Open with the workspace restored from snapshot from
	// (a checkpoint of this step) instead of the input's; "" means the
	// input's. checkpoint snapshots the workspace as it is and returns the
	// id. done's placement is the input's with the final snapshot.
	OpenFrom(ctx context.Context, in *session.Version, from string) (sb sandbox.Sandbox, done DoneFunc, checkpoint func(context.Context) (string, error), err error)
}

// sandboxNetwork reports whether a sandbox placed at p can reach a
// network: its spec asks for egress, or its backend is local (commands run
// on the worker host, with the host's network). The command built-ins are
// idempotent only without one (tool.Def.Network).
func sandboxNetwork(p session.Placement) bool {
	return cmp.Or(p.Backend, DefaultBackend) == local.Name || p.Spec.Network != "" && p.Spec.Network != "none"
}
