package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/tool"
)

// memJournal is an agent.Journal in memory that "crashes" (returns
// errCrash) at its crashAt-th Record, before (early) or after storing it.
type memJournal struct {
	mu      sync.Mutex
	entries []agent.JournalEntry
	n       int
	crashAt int
	early   bool
}

var errCrash = errors.New("crash")

func (j *memJournal) Load(context.Context) ([]agent.JournalEntry, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]agent.JournalEntry(nil), j.entries...), nil
}

func (j *memJournal) Record(_ context.Context, es ...agent.JournalEntry) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.n++
	crash := j.crashAt > 0 && j.n == j.crashAt
	if crash && j.early {
		return errCrash
	}
next:
	for _, e := range es {
		for i, o := range j.entries {
			if o.Round == e.Round && o.CallID == e.CallID && o.Kind == e.Kind {
				j.entries[i] = e
				continue next
			}
		}
		j.entries = append(j.entries, e)
	}
	if crash {
		return errCrash
	}
	return nil
}

// countingProvider counts model calls by round (assistant messages seen).
type countingProvider struct {
	llm.Scripted
	mu    sync.Mutex
	calls map[int]int
}

func (p *countingProvider) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	n := 0
	for _, m := range req.Messages {
		if m.Role == llm.RoleAssistant {
			n++
		}
	}
	p.mu.Lock()
	p.calls[n+1]++
	p.mu.Unlock()
	return p.Scripted.Chat(ctx, req)
}

// fiveRounds is a 5-round step: four rounds of one "count" call, then an
// answer.
func fiveRounds() []llm.ScriptReply {
	var rs []llm.ScriptReply
	for i := 1; i <= 4; i++ {
		rs = append(rs, llm.ScriptReply{ToolCalls: []session.ToolCall{call(fmt.Sprintf("c%d", i), "count", fmt.Sprintf(`{"x":"%d"}`, i))}})
	}
	return append(rs, llm.ScriptReply{Content: "done"})
}

func journalAgent(calls *atomic.Int64, idempotent bool, p llm.Provider) *agent.Agent {
	ct := &idemTool{funcTool: funcTool{name: "count", call: func(context.Context, json.RawMessage) (any, error) {
		return map[string]any{"n": calls.Add(1)}, nil
	}}, idempotent: idempotent}
	set, _ := tool.NewSet(ct)
	return &agent.Agent{Spec: agent.Spec{Name: "tester", Model: "scripted"}, Provider: p, Tools: set}
}

type idemTool struct {
	funcTool
	idempotent bool
}

func (t *idemTool) Def() tool.Def {
	d := t.funcTool.Def()
	d.Idempotent = t.idempotent
	return d
}

// TestJournalResumesAtEveryPoint crashes a 5-round tool step at every
// journal write, before and after it is stored, resumes it on the same
// journal, and checks the chunks equal an uninterrupted step's, no
// recorded round asks the model again, and no recorded call runs again.
func TestJournalResumesAtEveryPoint(t *testing.T) {
	ctx := context.Background()
	in := userSession(t, "count to four")
	var refCalls atomic.Int64
	ref, err := journalAgent(&refCalls, true, &llm.Scripted{Replies: fiveRounds()}).Run(ctx, in, agent.Meta{Journal: &memJournal{}})
	if err != nil {
		t.Fatal(err)
	}
	refJSON, _ := json.Marshal(ref.Chunks)
	// 5 replies + 4 starts + 4 results = 13 writes (a round's end rides
	// with the next reply).
	for at := 1; at <= 13; at++ {
		for _, early := range []bool{true, false} {
			t.Run(fmt.Sprintf("record%d/early=%v", at, early), func(t *testing.T) {
				j := &memJournal{crashAt: at, early: early}
				p := &countingProvider{Scripted: llm.Scripted{Replies: fiveRounds()}, calls: map[int]int{}}
				var calls atomic.Int64
				a := journalAgent(&calls, false, p)
				if _, err := a.Run(ctx, in, agent.Meta{Journal: j}); !errors.Is(err, errCrash) {
					t.Fatalf("first delivery: got %v, want the crash", err)
				}
				before := calls.Load()
				j.crashAt = 0
				res, err := a.Run(ctx, in, agent.Meta{Journal: j, Producer: session.Producer{Worker: "w2"}})
				// Writes: reply, start, result per tool round.
				isReply, isStart, isResult := at%3 == 1, at%3 == 2, at%3 == 0
				var amb *agent.AmbiguousError
				if isStart && !early || isResult && early {
					// Crashed between a start and its result: a
					// non-idempotent call is not run again.
					if !errors.As(err, &amb) || calls.Load() != before || amb.Worker != "" || amb.CallID != fmt.Sprintf("c%d", (at-1)/3+1) {
						t.Fatalf("crash after start record %d: got %v and %d calls, want an ambiguous call and %d", at, err, calls.Load(), before)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				got, _ := json.Marshal(res.Chunks)
				if string(got) != string(refJSON) {
					t.Fatalf("resumed chunks differ:\n got %s\nwant %s", got, refJSON)
				}
				for r, n := range p.calls {
					if isReply && early && r == (at-1)/3+1 {
						continue // the reply was not recorded
					}
					if n > 1 {
						t.Errorf("round %d asked the model %d times", r, n)
					}
				}
				if calls.Load() != 4 {
					t.Errorf("count ran %d times in all, want 4", calls.Load())
				}
			})
		}
	}
}

// TestJournalSingleCallStepWritesNothing: a step whose first reply has no
// tool calls ends at it, so it writes no journal entry (its commit holds
// the reply); a step whose first reply calls a tool records that reply
// before the call runs.
func TestJournalSingleCallStepWritesNothing(t *testing.T) {
	ctx := context.Background()
	in := userSession(t, "hello")
	var calls atomic.Int64
	j := &memJournal{}
	res, err := journalAgent(&calls, true, &llm.Scripted{Replies: []llm.ScriptReply{{Content: "hi"}}}).Run(ctx, in, agent.Meta{Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stop != agent.StopModel || j.n != 0 || len(j.entries) != 0 {
		t.Fatalf("single-call step: stop %q, %d journal writes %v; want stop %q and none", res.Stop, j.n, j.entries, agent.StopModel)
	}

	j = &memJournal{}
	if _, err := journalAgent(&calls, true, &llm.Scripted{Replies: fiveRounds()}).Run(ctx, in, agent.Meta{Journal: j}); err != nil {
		t.Fatal(err)
	}
	if len(j.entries) == 0 || j.entries[0].Kind != agent.JournalReply || j.entries[0].Round != 1 {
		t.Fatalf("tool step: first journal entry %v, want round 1's reply", j.entries)
	}
	replies := 0
	for _, e := range j.entries {
		if e.Kind == agent.JournalReply {
			replies++
		}
	}
	if replies != 5 {
		t.Fatalf("tool step recorded %d replies, want all 5 (its final reply too)", replies)
	}
}

// TestJournalAmbiguousIdempotentRunsAgain: a started call without a result
// runs again when its tool is idempotent.
func TestJournalAmbiguousIdempotentRunsAgain(t *testing.T) {
	ctx := context.Background()
	in := userSession(t, "count")
	// Record 2 is round 1's start: stored, then the crash.
	j := &memJournal{crashAt: 2}
	var calls atomic.Int64
	a := journalAgent(&calls, true, &llm.Scripted{Replies: fiveRounds()})
	if _, err := a.Run(ctx, in, agent.Meta{Journal: j}); !errors.Is(err, errCrash) {
		t.Fatalf("got %v, want the crash", err)
	}
	if calls.Load() != 0 {
		t.Fatalf("count ran %d times before the crash, want 0", calls.Load())
	}
	j.crashAt = 0
	if _, err := a.Run(ctx, in, agent.Meta{Journal: j}); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 4 {
		t.Fatalf("count ran %d times, want 4", calls.Load())
	}
	rs := agent.Resumes(j.entries)
	if len(rs) != 1 || rs[0].AfterRound != 1 {
		t.Fatalf("resumes = %+v, want one after round 1", rs)
	}
}

// TestJournalMCPIdempotentDeclared: an MCP server's tool listed under
// idempotent runs again after an ambiguous start; one not listed does not.
func TestJournalMCPIdempotentDeclared(t *testing.T) {
	ctx := context.Background()
	for _, listed := range []bool{true, false} {
		t.Run(fmt.Sprint("listed=", listed), func(t *testing.T) {
			var calls atomic.Int64
			ct := &funcTool{name: "srv__count", call: func(context.Context, json.RawMessage) (any, error) {
				return map[string]any{"n": calls.Add(1)}, nil
			}}
			set, _ := tool.NewSet(ct)
			srv := agent.MCPServer{Name: "srv", Command: "srv"}
			if listed {
				srv.Idempotent = []string{"count"}
			}
			replies := []llm.ScriptReply{
				{ToolCalls: []session.ToolCall{call("c1", "srv__count", `{}`)}},
				{Content: "done"},
			}
			a := &agent.Agent{Spec: agent.Spec{Name: "tester", Model: "scripted", MCP: []agent.MCPServer{srv}},
				Provider: &llm.Scripted{Replies: replies}, Tools: set}
			j := &memJournal{crashAt: 2} // the start is stored, then the crash
			in := userSession(t, "count")
			if _, err := a.Run(ctx, in, agent.Meta{Journal: j}); !errors.Is(err, errCrash) {
				t.Fatalf("got %v, want the crash", err)
			}
			j.crashAt = 0
			_, err := a.Run(ctx, in, agent.Meta{Journal: j})
			if listed && (err != nil || calls.Load() != 1) {
				t.Fatalf("listed: got %v and %d calls, want the call run once", err, calls.Load())
			}
			if !listed && (!errors.Is(err, agent.ErrAmbiguous) || calls.Load() != 0) {
				t.Fatalf("not listed: got %v and %d calls, want ErrAmbiguous and none", err, calls.Load())
			}
		})
	}
}
