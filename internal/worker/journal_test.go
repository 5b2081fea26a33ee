package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/bus/bustest"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/internal/worker"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/sandbox/sandboxtest"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/tool"
	"github.com/rath-run/rath/pkg/tool/builtin"
)

// appendTool appends its line to log.txt in the workspace: idempotent once
// the workspace is restored to the last recorded round.
type appendTool struct{ runs *atomic.Int64 }

func (appendTool) Def() tool.Def {
	return tool.Def{Name: "append", Idempotent: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}},"required":["x"],"additionalProperties":false}`)}
}
func (appendTool) ResourceKey(json.RawMessage) string { return "ws" }
func (t appendTool) Call(ctx context.Context, env tool.Env, args json.RawMessage) (any, error) {
	t.runs.Add(1)
	var a struct{ X string }
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, err
	}
	old, err := env.Sandbox.ReadFile(ctx, "log.txt", 1<<20)
	if err != nil {
		old = nil // the first round: no file yet
	}
	old = append(old, a.X+"\n"...)
	if err := env.Sandbox.WriteFile(ctx, "log.txt", old, 0o644); err != nil {
		return nil, err
	}
	return map[string]any{"lines": len(old)}, nil
}

// countTool counts its executions; not idempotent.
type countTool struct{ runs *atomic.Int64 }

func (countTool) Def() tool.Def {
	return tool.Def{Name: "count", Parameters: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}},"additionalProperties":false}`)}
}
func (countTool) ResourceKey(json.RawMessage) string { return "ws" }
func (t countTool) Call(context.Context, tool.Env, json.RawMessage) (any, error) {
	t.runs.Add(1)
	return map[string]any{"ok": true}, nil
}

// countingModel is a scripted model that counts requests per round.
type countingModel struct {
	llm.Scripted
	mu    sync.Mutex
	calls map[int]int
}

func (m *countingModel) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	n := 1
	for _, msg := range req.Messages {
		if msg.Role == llm.RoleAssistant {
			n++
		}
	}
	m.mu.Lock()
	m.calls[n]++
	m.mu.Unlock()
	return m.Scripted.Chat(ctx, req)
}

// journalScript: rounds 1–4 append line i and count; round 5 answers.
func journalScript() []llm.ScriptReply {
	var rs []llm.ScriptReply
	for i := 1; i <= 4; i++ {
		rs = append(rs, llm.ScriptReply{ToolCalls: []session.ToolCall{
			{ID: fmt.Sprintf("a%d", i), Type: "function", Function: session.FunctionCall{Name: "append", Arguments: fmt.Sprintf(`{"x":"line %d"}`, i)}},
			{ID: fmt.Sprintf("c%d", i), Type: "function", Function: session.FunctionCall{Name: "count", Arguments: `{}`}},
		}})
	}
	return append(rs, llm.ScriptReply{Content: "done"})
}

type journalOutcome struct {
	chunks   []string
	snapshot string
	usage    session.Usage
	files    map[string]string
	model    map[int]int
	appends  int64
	counts   int64
	journal  []runs.JournalEntry
	commits  int // 1 when the output carries the step's key
	out      session.Session
}

// runJournaled runs the 5-round step on a fresh worker that "dies" (its
// step goroutine exits without ack, nak or commit, its heartbeats stop)
// the first time it reaches crash at round, and returns what committed.
func runJournaled(t *testing.T, crash string, round int) journalOutcome {
	t.Helper()
	o, run := runScript(t, crash, round, journalScript())
	if run.Status != runs.RunSucceeded || run.Output == nil {
		t.Fatalf("run %s: %s (%s)", run.ID, run.Status, run.Error)
	}
	return o
}

// runScript runs script's step as runJournaled does and returns the run
// as it ended (the outcome is filled only when it succeeded).
func runScript(t *testing.T, crash string, round int, script []llm.ScriptReply) (journalOutcome, runs.Run) {
	t.Helper()
	return runReviewed(t, crash, round, script, nil)
}

// runReviewed is runScript with review called (once) when the run waits:
// it decides, and republishes the step's job.
func runReviewed(t *testing.T, crash string, round int, script []llm.ScriptReply,
	review func(ctx context.Context, rs *runs.Store, b *bus.Bus, job bus.Job)) (journalOutcome, runs.Run) {
	t.Helper()
	ctx := context.Background()
	b, _, _ := bustest.NewWith(t, bustest.Options{InProcess: true, Config: bus.Config{AckWait: 2 * time.Second}})
	st, rs := openStores(t)
	var appends, counts atomic.Int64
	reg := builtin.NewRegistry()
	if err := reg.Register(appendTool{&appends}, countTool{&counts}); err != nil {
		t.Fatal(err)
	}
	model := &countingModel{Scripted: llm.Scripted{Replies: script}, calls: map[int]int{}}
	var fired atomic.Bool
	reached := make(chan struct{}) // closed when the crash fires
	cons, err := b.Consumer(ctx, "journal")
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(st, rs, cons, b, func(agent.Spec) (llm.Provider, string, error) { return model, "scripted", nil }, worker.Config{
		Name: "w", Queue: "journal", Slots: 1, MaxDeliver: b.Config().MaxDeliver, Heartbeat: 500 * time.Millisecond,
		FetchWait: 200 * time.Millisecond, ShutdownTimeout: 10 * time.Second, Logger: failureLog(t, "w"), Tools: reg,
		Workspaces: &worker.SnapshotWorkspaces{Backends: localBackends(), Snapshots: snapshotter(t, b), Dir: sandboxtest.Dir(t)},
		CrashAt: func(p string, r int) {
			if p == crash && (round == 0 || r == round) && fired.CompareAndSwap(false, true) {
				close(reached)
				runtime.Goexit() // the step dies here; the job is redelivered after AckWait
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)

	in, err := session.FromUserMessage(ctx, st, "append four lines")
	if err != nil {
		t.Fatal(err)
	}
	target, _ := json.Marshal(agent.Spec{Name: "appender", Model: "scripted", Tools: []string{"append", "count", builtin.RunShellCommand}, Script: script})
	run := runs.Run{ID: runs.NewRunID(), Queue: "journal", Target: target, Input: in.ID()}
	if err := rs.Create(ctx, &run, []runs.Step{{Input: in.ID()}}); err != nil {
		t.Fatal(err)
	}
	stepID := run.Steps[0].ID
	job := bus.Job{StepID: stepID, RunID: run.ID, Queue: run.Queue, Input: in.ID().String(), Target: target}
	if _, err := b.Publish(ctx, job, nil); err != nil {
		t.Fatal(err)
	}
	reviewed := false
	testenv.Eventually(t, 60*time.Second, "run "+run.ID+" to end", func() bool {
		if run, err = rs.Get(ctx, run.ID); err != nil {
			t.Fatal(err)
		}
		if run.Status == runs.RunWaiting && review != nil && !reviewed {
			reviewed = true
			review(ctx, rs, b, job)
		}
		return run.Status.Terminal()
	})
	if crash != "" {
		// The run can end before the crash point is reached: after_commit
		// comes once the commit, which ends the run, has returned.
		select {
		case <-reached:
		case <-time.After(10 * time.Second):
			t.Fatalf("the worker never reached %s (round %d)", crash, round)
		}
	}
	if run.Status != runs.RunSucceeded || run.Output == nil {
		return journalOutcome{counts: counts.Load(), appends: appends.Load()}, run
	}
	out, err := session.Open(ctx, st, *run.Output)
	if err != nil {
		t.Fatal(err)
	}
	o := journalOutcome{out: out, snapshot: out.Placement().Snapshot, usage: out.Usage(), model: model.calls,
		appends: appends.Load(), counts: counts.Load()}
	for _, c := range out.Version().Chunks {
		o.chunks = append(o.chunks, c.Hash())
	}
	if out.Version().Key == stepID {
		o.commits = 1
	}
	o.files = (&wsRig{inspect: snapshotter(t, b)}).files(t, out)
	if o.journal, err = rs.LoadJournal(ctx, stepID); err != nil {
		t.Fatal(err)
	}
	return o, run
}

// TestJournalKillPoints kills a worker at each point of a 5-round tool
// step and checks the resumed step commits once, with the chunks and
// workspace an uninterrupted step commits, no repeated model request for a
// recorded round and no repeated run of a recorded call.
func TestJournalKillPoints(t *testing.T) {
	ref := runJournaled(t, "", 0)
	if ref.files["log.txt"] != "line 1\nline 2\nline 3\nline 4\n" {
		t.Fatalf("uninterrupted step wrote %q", ref.files["log.txt"])
	}
	for _, tc := range []struct {
		point string
		round int
		// inflight is the round whose model request is repeated (its
		// reply was not recorded), 0 for none; reappend is how many times
		// more the idempotent append runs (a round not recorded restores
		// its workspace and runs it again).
		inflight, reappend int
	}{
		{worker.CrashBeforeReply, 3, 3, 1}, // round 2's end rode with this reply: its append runs again
		{worker.CrashAfterReply, 3, 0, 0},
		{worker.CrashToolStarted, 3, 0, 0}, // started, not run: runs once
		{worker.CrashToolResult, 3, 0, 1},
		{worker.CrashBeforeCommit, 0, 0, 0},
		{worker.CrashAfterCommit, 0, 0, 0},
	} {
		t.Run(tc.point, func(t *testing.T) {
			got := runJournaled(t, tc.point, tc.round)
			if fmt.Sprint(got.chunks) != fmt.Sprint(ref.chunks) || got.snapshot != ref.snapshot || got.usage != ref.usage {
				t.Fatalf("resumed step committed chunks %v snapshot %s usage %+v\nuninterrupted: %v snapshot %s usage %+v",
					got.chunks, got.snapshot, got.usage, ref.chunks, ref.snapshot, ref.usage)
			}
			if got.commits != 1 {
				t.Errorf("the output does not carry the step's key")
			}
			for r, n := range got.model {
				want := 1
				if r == tc.inflight {
					want = 2
				}
				if n != want {
					t.Errorf("round %d: %d model requests, want %d", r, n, want)
				}
			}
			if got.counts != 4 {
				t.Errorf("count ran %d times, want 4 (no repeated run of a recorded call)", got.counts)
			}
			if got.appends != 4+int64(tc.reappend) {
				t.Errorf("append ran %d times, want %d", got.appends, 4+tc.reappend)
			}
			if got.files["log.txt"] != ref.files["log.txt"] {
				t.Errorf("workspace log.txt = %q, want %q", got.files["log.txt"], ref.files["log.txt"])
			}
			// The committed step's payload (replies, tool calls and results)
			// lives in its version only: copies in the journal would outlive
			// a redaction. Its rounds stay as evidence.
			rounds := 0
			for _, e := range got.journal {
				switch e.Kind {
				case agent.JournalReply, agent.JournalStart, agent.JournalResult:
					t.Errorf("journal entry %s (round %d, call %q) kept after the commit", e.Kind, e.Round, e.CallID)
				case agent.JournalRound:
					rounds++
				}
			}
			if rounds == 0 {
				t.Errorf("no round entry kept after the commit")
			}
			rs := agent.Resumes(toAgent(got.journal))
			if wantResumes := map[bool]int{true: 0, false: 1}[tc.point == worker.CrashAfterCommit]; len(rs) != wantResumes {
				t.Errorf("resumes recorded: %+v, want 1", rs)
			}
		})
	}
}

func toAgent(es []runs.JournalEntry) []agent.JournalEntry {
	var out []agent.JournalEntry
	for _, e := range es {
		out = append(out, agent.JournalEntry{Round: e.Round, CallID: e.CallID, Kind: e.Kind, Worker: e.Worker, Data: e.Data})
	}
	return out
}

// ambiguousScript: one round calling the non-idempotent count tool, then
// an answer.
func ambiguousScript() []llm.ScriptReply {
	return []llm.ScriptReply{
		{ToolCalls: []session.ToolCall{{ID: "c1", Type: "function", Function: session.FunctionCall{Name: "count", Arguments: `{"x":"once"}`}}}},
		{Content: "done"},
	}
}

// reviewWith returns a review hook that checks the run waits on call c1,
// records decision and publishes the step again.
func reviewWith(t *testing.T, decision agent.Review, seen *[]runs.PendingReview) func(context.Context, *runs.Store, *bus.Bus, bus.Job) {
	return reviewToolWith(t, "count", decision, seen)
}

// reviewToolWith is reviewWith for a call of the named tool.
func reviewToolWith(t *testing.T, name string, decision agent.Review, seen *[]runs.PendingReview) func(context.Context, *runs.Store, *bus.Bus, bus.Job) {
	return func(ctx context.Context, rs *runs.Store, b *bus.Bus, job bus.Job) {
		ps, err := rs.PendingReviews(ctx, job.RunID)
		if err != nil {
			t.Fatal(err)
		}
		*seen = ps
		if len(ps) != 1 {
			t.Fatalf("pending reviews: %+v, want one", ps)
		}
		decision.CallID, decision.Round, decision.Tool = ps[0].CallID, ps[0].Round, name
		data, err := json.Marshal(decision)
		if err != nil {
			t.Fatal(err)
		}
		st, err := rs.Review(ctx, ps[0].StepID, ps[0].Round, ps[0].CallID, "tester", data)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status != runs.StepPending {
			t.Fatalf("reviewed step is %s, want pending", st.Status)
		}
		if _, err := rs.Review(ctx, ps[0].StepID, ps[0].Round, ps[0].CallID, "tester", data); !errors.Is(err, runs.ErrNoReview) {
			t.Fatalf("a second review: %v, want ErrNoReview", err)
		}
		hdr := nats.Header{}
		hdr.Set(bus.HeaderMsgID, runs.ReviewMsgID(ps[0].StepID, ps[0].Round, ps[0].CallID))
		if _, err := b.Publish(ctx, job, hdr); err != nil {
			t.Fatal(err)
		}
	}
}

// checkAmbiguous checks the pending review names the call, its arguments
// and the worker that started it.
func checkAmbiguous(t *testing.T, ps []runs.PendingReview) {
	t.Helper()
	if len(ps) != 1 {
		t.Fatalf("pending reviews: %+v, want one", ps)
	}
	var amb agent.AmbiguousError
	if err := json.Unmarshal(ps[0].Data, &amb); err != nil {
		t.Fatal(err)
	}
	if amb.CallID != "c1" || amb.Tool != "count" || amb.Arguments != `{"x":"once"}` || amb.Worker != "w" || amb.Round != 1 {
		t.Fatalf("ambiguous call %+v, want c1 count {\"x\":\"once\"} on w in round 1", amb)
	}
}

// TestJournalAmbiguousCallNeedsReview: a worker dies between the start of
// a non-idempotent call and its result; the redelivery does not run it
// again but stops the run in needs_review (the store's waiting, with the
// call pending a review), and nothing runs until a review decides:
// retry runs the call once more, skip uses the given result without
// running it, fail fails the step with the reason.
func TestJournalAmbiguousCallNeedsReview(t *testing.T) {
	t.Run("retry", func(t *testing.T) {
		var seen []runs.PendingReview
		o, run := runReviewed(t, worker.CrashToolStarted, 1, ambiguousScript(),
			reviewWith(t, agent.Review{Decision: agent.ReviewRetry}, &seen))
		checkAmbiguous(t, seen)
		if run.Status != runs.RunSucceeded {
			t.Fatalf("run %s: %s (%s), want succeeded", run.ID, run.Status, run.Error)
		}
		// The first delivery started it (the crash came after the start was
		// recorded, before the call); the retry ran it once.
		if o.counts != 1 {
			t.Fatalf("count ran %d times, want 1 (the retry)", o.counts)
		}
		checkReviewChunk(t, o, agent.ReviewRetry)
	})
	t.Run("skip", func(t *testing.T) {
		var seen []runs.PendingReview
		o, run := runReviewed(t, worker.CrashToolStarted, 1, ambiguousScript(),
			reviewWith(t, agent.Review{Decision: agent.ReviewSkip, Result: json.RawMessage(`{"ok":"it had run"}`)}, &seen))
		checkAmbiguous(t, seen)
		if run.Status != runs.RunSucceeded {
			t.Fatalf("run %s: %s (%s), want succeeded", run.ID, run.Status, run.Error)
		}
		if o.counts != 0 {
			t.Fatalf("count ran %d times, want 0 (skipped)", o.counts)
		}
		out := checkReviewChunk(t, o, agent.ReviewSkip)
		var found bool
		for _, c := range out.Version().Chunks {
			if c.Kind() == session.KindToolResult && strings.Contains(string(c.Payload()), `it had run`) {
				found = true
			}
		}
		if !found {
			t.Fatal("the skip's result is not the call's tool result")
		}
		// The ambiguous and review entries stay as evidence, without the
		// text the version holds (a redaction of the version reaches
		// every copy).
		kinds := map[string]bool{}
		for _, e := range o.journal {
			kinds[e.Kind] = true
			for _, text := range []string{"it had run", `"once"`} {
				if strings.Contains(string(e.Data), text) {
					t.Errorf("journal entry %s (round %d, call %q) keeps %s after the commit: %s", e.Kind, e.Round, e.CallID, text, e.Data)
				}
			}
		}
		if !kinds[agent.JournalAmbiguous] || !kinds[agent.JournalReview] {
			t.Errorf("journal kinds after the commit: %v, want the ambiguous and review entries kept", kinds)
		}
	})
	t.Run("fail", func(t *testing.T) {
		var seen []runs.PendingReview
		o, run := runReviewed(t, worker.CrashToolStarted, 1, ambiguousScript(),
			reviewWith(t, agent.Review{Decision: agent.ReviewFail, Reason: "the payment went through twice before"}, &seen))
		checkAmbiguous(t, seen)
		if run.Status != runs.RunFailed {
			t.Fatalf("run %s: %s, want failed", run.ID, run.Status)
		}
		for _, want := range []string{"c1", "count", "the payment went through twice before"} {
			if !strings.Contains(run.Error, want) {
				t.Errorf("run error %q does not name %q", run.Error, want)
			}
		}
		if o.counts != 0 {
			t.Fatalf("count ran %d times, want 0 (failed)", o.counts)
		}
	})
}

// checkReviewChunk checks the run's output holds one review chunk with
// the decision, before the call's tool result, and returns the output.
func checkReviewChunk(t *testing.T, o journalOutcome, decision string) session.Session {
	t.Helper()
	out := o.out
	var n, at, result int
	for i, c := range out.Version().Chunks {
		switch c.Kind() {
		case session.KindReview:
			r, err := agent.ParseReview(c.Payload())
			if err != nil {
				t.Fatal(err)
			}
			if r.Decision != decision || r.CallID != "c1" || r.By != "" && r.By != "tester" {
				t.Fatalf("review chunk %+v, want %s of c1", r, decision)
			}
			n, at = n+1, i
		case session.KindToolResult:
			result = i
		}
	}
	if n != 1 || at > result {
		t.Fatalf("%d review chunks (the last at %d, the tool result at %d), want one before the result", n, at, result)
	}
	return out
}

// TestJournalShellWithNetworkNeedsReview: run_shell_command is idempotent
// only in a sandbox without network, and the local backend runs commands
// on the host, with its network. A worker that dies between the start of
// a shell call and its result leaves it ambiguous: the redelivery does not
// run it again but waits for a review; retry runs it once.
func TestJournalShellWithNetworkNeedsReview(t *testing.T) {
	// The sandbox's commands run as another user: the count file is
	// theirs to append to.
	ran := filepath.Join(t.TempDir(), "ran.txt")
	if err := os.WriteFile(ran, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(ran, 0o666); err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(map[string]string{"cmd": "echo x >> " + ran})
	script := []llm.ScriptReply{
		{ToolCalls: []session.ToolCall{{ID: "c1", Type: "function", Function: session.FunctionCall{Name: builtin.RunShellCommand, Arguments: string(args)}}}},
		{Content: "done"},
	}
	var seen []runs.PendingReview
	o, run := runReviewed(t, worker.CrashToolStarted, 1, script,
		reviewToolWith(t, builtin.RunShellCommand, agent.Review{Decision: agent.ReviewRetry}, &seen))
	if len(seen) != 1 {
		t.Fatalf("pending reviews: %+v, want one (the shell call)", seen)
	}
	var amb agent.AmbiguousError
	if err := json.Unmarshal(seen[0].Data, &amb); err != nil {
		t.Fatal(err)
	}
	if amb.CallID != "c1" || amb.Tool != builtin.RunShellCommand || amb.Arguments != string(args) || amb.Worker != "w" {
		t.Fatalf("ambiguous call %+v, want c1 %s %s on w", amb, builtin.RunShellCommand, args)
	}
	if run.Status != runs.RunSucceeded {
		t.Fatalf("run %s: %s (%s), want succeeded", run.ID, run.Status, run.Error)
	}
	b, err := os.ReadFile(ran)
	if err != nil {
		for _, c := range o.out.Version().Chunks {
			t.Logf("%s: %s", c.Kind(), c.Payload())
		}
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n != 1 {
		t.Fatalf("the command ran %d times, want 1 (the retry)", n)
	}
	checkReviewChunk(t, o, agent.ReviewRetry)
}
