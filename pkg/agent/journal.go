package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/tool"
)

// Journal kinds ([JournalEntry.Kind]).
const (
	// JournalReply is a model reply (its content, tool calls and usage),
	// recorded before the round's tools run. Data: the [llm.Response].
	JournalReply = "reply"
	// JournalStart is a tool call about to run. Data: {"tool","arguments"}.
	JournalStart = "start"
	// JournalResult is a tool call's result body. Data: {"content"}.
	JournalResult = "result"
	// JournalRound is the end of a round, after all its results. Data:
	// {"snapshot"}: the workspace snapshot after the round ("" without
	// a workspace).
	JournalRound = "round"
	// JournalResume records that a delivery found the journal of an
	// earlier one and resumed. Data: {"after_round","worker","from_worker"}.
	JournalResume = "resume"
)

// JournalEntry is one record of a step's journal, keyed by the step (the
// journal's owner), Round (1-based model call), CallID ("" for entries of
// the round) and Kind.
type JournalEntry struct {
	Round  int             `json:"round"`
	CallID string          `json:"call_id,omitempty"`
	Kind   string          `json:"kind"`
	Worker string          `json:"worker,omitempty"`
	Data   json.RawMessage `json:"data,omitempty"`
}

// Journal records a step's progress durably so that a redelivered step
// resumes where the last delivery stopped (package worker keeps it in the
// run store). The loop records, each before it goes on:
//
//   - each model reply with its usage (JournalReply), before running the
//     reply's tool calls (except a first reply without tool calls: it
//     ends the step, and its commit holds it);
//   - each tool call's start (JournalStart) before the call and its result
//     (JournalResult) after it;
//   - each round's end (JournalRound), with Meta.Checkpoint's workspace
//     snapshot (a round that ran only read-only or MCP tools reuses the
//     delivery's last snapshot: tool.Def.ReadOnly promises no writes).
//
// On a step whose journal holds entries, the loop replays it: a recorded
// reply is used instead of a model call, a recorded result instead of a
// tool call, so the chunks are byte for byte those of an uninterrupted
// step. Two exceptions keep the workspace consistent with the transcript:
// in a round whose end was not recorded, results of tools that are
// idempotent but not read-only (they change the workspace) are not reused
// — the workspace is the last recorded round's, so the call runs again.
// A call that started and has no result is ambiguous: an idempotent tool
// runs again; any other stops the step with an [*AmbiguousError] unless a
// review decided it (see JournalReview). A tool that declares
// tool.Def.Network (it runs commands) is idempotent only when
// Meta.Network is false; in a sandbox with network its call is ambiguous
// also when its result was recorded in a round whose end was not (the
// workspace it changed is lost: AmbiguousError.WorkspaceLost). MCP tools
// never change the workspace: their recorded results are always reused.
//
// A round's end is recorded with the next write (the next reply, or a
// call's start), not on its own: losing it in a crash only means the
// round's workspace changes are made again from the round before (the
// calls that made them are idempotent), and it saves a durable write per
// round.
//
// Record must be durable when it returns, all entries or none; recording
// an entry again under the same key replaces it.
type Journal interface {
	Load(ctx context.Context) ([]JournalEntry, error)
	Record(ctx context.Context, es ...JournalEntry) error
}

// ErrAmbiguous is wrapped by [*AmbiguousError].
var ErrAmbiguous = errors.New("ambiguous tool call")

// AmbiguousError is a tool call an earlier delivery started and recorded
// no result for, to a tool not declared idempotent: whether its effect
// happened is unknown, so it is not run again without a decision.
type AmbiguousError struct {
	Round     int    `json:"round"`
	CallID    string `json:"call_id"`
	Tool      string `json:"tool"`
	Arguments string `json:"arguments"`
	// Worker is the worker that started the call.
	Worker string `json:"worker"`
	// WorkspaceLost says the call's result was recorded but the
	// workspace it changed was not (a command in a sandbox with network,
	// in a round whose end was not recorded): running it again may reach
	// the network twice, keeping its result loses its workspace changes.
	WorkspaceLost bool `json:"workspace_lost,omitempty"`
}

func (e *AmbiguousError) Error() string {
	if e.WorkspaceLost {
		return fmt.Sprintf("tool call %s (%s, round %d, arguments %s) ran on worker %s, but the workspace it changed was lost; %s runs in a sandbox with network, so it is not idempotent and needs a review",
			e.CallID, e.Tool, e.Round, cutString(e.Arguments, 256), e.Worker, e.Tool)
	}
	return fmt.Sprintf("tool call %s (%s, round %d, arguments %s) was started on worker %s and has no recorded result; %s is not idempotent, so it needs a review",
		e.CallID, e.Tool, e.Round, cutString(e.Arguments, 256), e.Worker, e.Tool)
}

// Unwrap returns ErrAmbiguous.
func (e *AmbiguousError) Unwrap() error { return ErrAmbiguous }

type callKey struct {
	round int
	id    string
}

// replay is one step's journal as the loop uses it: what an earlier
// delivery recorded, and the journal to record into. A nil *replay
// records nothing and replays nothing.
type replay struct {
	j          Journal
	worker     string
	checkpoint func(ctx context.Context) (string, error)
	idem       func(tool.Tool) bool // Agent.idempotent, false for networked
	networked  func(tool.Tool) bool // declared idempotent, but runs commands in a sandbox with network
	workspace  func(tool.Tool) bool // may change the workspace: not read-only, not MCP
	sandboxed  bool                 // the step has a workspace (Meta.Sandbox)
	replies    map[int]llm.Response
	results    map[callKey]string
	started    map[callKey]string // worker that started it
	lastRound  int                // last round whose end was recorded
	snapshot   string             // this delivery's last checkpoint
	snapped    bool               // snapshot is set
	mu         sync.Mutex         // guards err, pending and changed
	changed    bool               // a tool that may change the workspace ran since the last checkpoint
	err        error
	pending    []JournalEntry // recorded with the next write
	reviews    map[callKey]Review
	chunks     []session.Chunk // review chunks for the round's transcript
}

type startData struct {
	Tool      string `json:"tool"`
	Arguments string `json:"arguments"`
}

type resultData struct {
	Content string `json:"content"`
}

type roundData struct {
	Snapshot string `json:"snapshot"`
}

// loadJournal reads m.Journal and, when it holds entries, records that
// this delivery resumes.
func loadJournal(ctx context.Context, m Meta) (*replay, error) {
	if m.Journal == nil {
		return nil, nil
	}
	es, err := m.Journal.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("journal: load: %w", err)
	}
	rp := &replay{j: m.Journal, worker: m.Producer.Worker, checkpoint: m.Checkpoint,
		replies: map[int]llm.Response{}, results: map[callKey]string{}, started: map[callKey]string{},
		reviews: map[callKey]Review{}}
	after, from, resumes := 0, "", 0
	for _, e := range es {
		k := callKey{e.Round, e.CallID}
		switch e.Kind {
		case JournalReply:
			var r llm.Response
			if err := json.Unmarshal(e.Data, &r); err != nil {
				return nil, fmt.Errorf("journal: round %d reply: %w", e.Round, err)
			}
			rp.replies[e.Round] = r
			if e.Round > after {
				after, from = e.Round, e.Worker
			}
		case JournalStart:
			rp.started[k] = e.Worker
		case JournalResult:
			var d resultData
			if err := json.Unmarshal(e.Data, &d); err != nil {
				return nil, fmt.Errorf("journal: round %d call %s result: %w", e.Round, e.CallID, err)
			}
			rp.results[k] = d.Content
		case JournalRound:
			rp.lastRound = max(rp.lastRound, e.Round)
		case JournalResume:
			resumes++
		case JournalReview:
			r, err := ParseReview(e.Data)
			if err != nil {
				return nil, fmt.Errorf("journal: round %d call %s: %w", e.Round, e.CallID, err)
			}
			rp.reviews[k] = r
		}
	}
	if len(rp.replies) > 0 {
		d, _ := json.Marshal(ResumeInfo{AfterRound: after, Worker: rp.worker, FromWorker: from})
		err := rp.j.Record(ctx, JournalEntry{Round: after, CallID: strconv.Itoa(resumes + 1), Kind: JournalResume, Worker: rp.worker, Data: d})
		if err != nil {
			return nil, fmt.Errorf("journal: record resume: %w", err)
		}
	}
	return rp, nil
}

// reply returns round's recorded reply.
func (rp *replay) reply(round int) (llm.Response, bool) {
	if rp == nil {
		return llm.Response{}, false
	}
	r, ok := rp.replies[round]
	return r, ok
}

func (rp *replay) record(ctx context.Context, e JournalEntry) error {
	if rp == nil {
		return nil
	}
	e.Worker = rp.worker
	rp.mu.Lock()
	es := make([]JournalEntry, 0, len(rp.pending)+1)
	es = append(es, rp.pending...)
	es = append(es, e)
	rp.pending = nil
	rp.mu.Unlock()
	if err := rp.j.Record(ctx, es...); err != nil {
		return fmt.Errorf("journal: record %s of round %d: %w", e.Kind, e.Round, err)
	}
	return nil
}

// recordReply records round's reply before the loop goes on. A first
// reply without tool calls is not recorded: it ends the step (the loop
// returns at a reply without calls), the version's commit that follows
// holds it, and a delivery that dies before that commit loses only this
// one model request — the one a delivery dying during the call loses
// anyway. That is a single-call step's whole journal, so such a step
// writes none (issue 25: a durable write and a round trip less per step).
func (rp *replay) recordReply(ctx context.Context, round int, r llm.Response) error {
	if rp == nil {
		return nil
	}
	if round == 1 && len(r.ToolCalls) == 0 && rp.quiet() {
		return nil
	}
	d, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("journal: encode reply of round %d: %w", round, err)
	}
	return rp.record(ctx, JournalEntry{Round: round, Kind: JournalReply, Data: d})
}

// quiet reports that nothing waits to ride with the next write.
func (rp *replay) quiet() bool {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return len(rp.pending) == 0
}

// recorded returns the result to reuse for a call of t, if any.
func (rp *replay) recorded(round int, id string, t tool.Tool) (string, bool) {
	if rp == nil {
		return "", false
	}
	body, ok := rp.results[callKey{round, id}]
	if !ok {
		return "", false
	}
	if rp.lostWorkspace(round, t) && (rp.idem(t) || rp.networked(t)) {
		// It changed a workspace that is restored to an earlier round, or
		// (without checkpoints) not restored at all: an idempotent call
		// runs again, in order, to make the workspace the transcript
		// describes; a command in a sandbox with network is ambiguous
		// (its result is known, its workspace changes are lost, and
		// running it again may reach the network twice).
		return "", false
	}
	if r, ok := rp.reviews[callKey{round, id}]; ok && r.Decision != ReviewFail {
		if c, err := ReviewChunk(r); err == nil {
			rp.addChunk(c) // the decision stays in the transcript on a resume
		}
	}
	return body, true
}

// ambiguous returns an *AmbiguousError for a started call without a
// result whose tool may not run again.
func (rp *replay) ambiguous(round int, id string, t tool.Tool, args string) error {
	if rp == nil {
		return nil
	}
	k := callKey{round, id}
	w, started := rp.started[k]
	_, done := rp.results[k]
	lost := done && rp.networked(t) && rp.lostWorkspace(round, t)
	if !started || done && !lost || rp.idem(t) {
		return nil
	}
	return &AmbiguousError{Round: round, CallID: id, Tool: t.Def().Name, Arguments: cutString(args, maxEventArgs), Worker: w,
		WorkspaceLost: lost}
}

// lostWorkspace reports whether a call of t in round changed a workspace
// this delivery does not have: the round's end was not recorded (the
// workspace is the last recorded round's), or there are no checkpoints.
func (rp *replay) lostWorkspace(round int, t tool.Tool) bool {
	return rp.sandboxed && rp.workspace(t) && (rp.checkpoint == nil || round > rp.lastRound)
}

// begin and end record a call's start and result; a failure is kept for
// failed.
func (rp *replay) begin(ctx context.Context, round int, id, name string, args json.RawMessage) bool {
	if rp == nil {
		return true
	}
	d, _ := json.Marshal(startData{Tool: name, Arguments: string(args)})
	return rp.keep(rp.record(ctx, JournalEntry{Round: round, CallID: id, Kind: JournalStart, Data: d}))
}

func (rp *replay) end(ctx context.Context, round int, id, body string) {
	if rp == nil {
		return
	}
	d, _ := json.Marshal(resultData{Content: body})
	rp.keep(rp.record(ctx, JournalEntry{Round: round, CallID: id, Kind: JournalResult, Data: d}))
}

func (rp *replay) keep(err error) bool {
	if err == nil {
		return true
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.err == nil {
		rp.err = err
	}
	return false
}

// failed returns the first recording failure.
func (rp *replay) failed() error {
	if rp == nil {
		return nil
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return rp.err
}

// running notes that a call of t is about to run: when t may change the
// workspace, the round's end takes a new checkpoint.
func (rp *replay) running(t tool.Tool) {
	if rp == nil || !rp.workspace(t) {
		return
	}
	rp.mu.Lock()
	rp.changed = true
	rp.mu.Unlock()
}

// endRound records round's end with the workspace's snapshot (with the
// next write), unless an earlier delivery did. A round that ran no tool
// that may change the workspace (only read-only and MCP tools, or recorded
// results) reuses this delivery's last checkpoint instead of taking one:
// the tree is the one that checkpoint recorded.
func (rp *replay) endRound(ctx context.Context, round int) error {
	if rp == nil || round <= rp.lastRound {
		return nil
	}
	var d roundData
	if rp.checkpoint != nil {
		rp.mu.Lock()
		changed := rp.changed
		rp.changed = false
		rp.mu.Unlock()
		if changed || !rp.snapped {
			id, err := rp.checkpoint(ctx)
			if err != nil {
				return fmt.Errorf("journal: workspace snapshot after round %d: %w", round, err)
			}
			rp.snapshot, rp.snapped = id, true
		}
		d.Snapshot = rp.snapshot
	}
	b, _ := json.Marshal(d)
	rp.mu.Lock()
	rp.pending = append(rp.pending, JournalEntry{Round: round, Kind: JournalRound, Worker: rp.worker, Data: b})
	rp.mu.Unlock()
	return nil
}

// LastSnapshot returns the workspace snapshot recorded at the end of the
// last recorded round of es, and that round (0 and "" when none was).
func LastSnapshot(es []JournalEntry) (round int, snapshot string) {
	for _, e := range es {
		if e.Kind != JournalRound || e.Round <= round {
			continue
		}
		var d roundData
		if json.Unmarshal(e.Data, &d) == nil {
			round, snapshot = e.Round, d.Snapshot
		}
	}
	return round, snapshot
}

// Resumes returns the resume records of es: "resumed after round N on
// worker W" (from the worker that recorded round N).
func Resumes(es []JournalEntry) []ResumeInfo {
	var out []ResumeInfo
	for _, e := range es {
		if e.Kind != JournalResume {
			continue
		}
		var d ResumeInfo
		if json.Unmarshal(e.Data, &d) == nil {
			out = append(out, d)
		}
	}
	return out
}

// ResumeInfo is one resume of a step: the delivery on Worker resumed
// after round AfterRound, which FromWorker recorded.
type ResumeInfo struct {
	AfterRound int    `json:"after_round"`
	Worker     string `json:"worker"`
	FromWorker string `json:"from_worker,omitempty"`
}
