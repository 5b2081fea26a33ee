package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/tool"
)

// funcTool is a test tool: name, schema, key and behavior as functions.
type funcTool struct {
	name   string
	schema string
	key    func(args json.RawMessage) string
	call   func(ctx context.Context, args json.RawMessage) (any, error)
}

func (f *funcTool) Def() tool.Def {
	s := f.schema
	if s == "" {
		s = `{"type":"object","properties":{"x":{"type":"string"}},"additionalProperties":false}`
	}
	return tool.Def{Name: f.name, Description: "test tool " + f.name, Parameters: json.RawMessage(s)}
}

func (f *funcTool) ResourceKey(args json.RawMessage) string {
	if f.key == nil {
		return f.name
	}
	return f.key(args)
}

func (f *funcTool) Call(ctx context.Context, _ tool.Env, args json.RawMessage) (any, error) {
	return f.call(ctx, args)
}

// byArg keys calls by their "x" argument.
func byArg(args json.RawMessage) string {
	var a struct{ X string }
	_ = json.Unmarshal(args, &a)
	return a.X
}

func call(id, name, args string) session.ToolCall {
	return session.ToolCall{ID: id, Type: "function", Function: session.FunctionCall{Name: name, Arguments: args}}
}

func newAgent(t *testing.T, replies []llm.ScriptReply, tools ...tool.Tool) *agent.Agent {
	t.Helper()
	set, err := tool.NewSet(tools...)
	if err != nil {
		t.Fatal(err)
	}
	return &agent.Agent{
		Spec:     agent.Spec{Name: "tester", Model: "scripted", Instructions: "Be brief."},
		Provider: &llm.Scripted{Replies: replies},
		Tools:    set,
	}
}

func userSession(t *testing.T, text string) session.Session {
	t.Helper()
	s, err := session.FromUserMessage(context.Background(), session.NewMemoryGraph(), text)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// results returns the tool_result bodies of a version's chunks, decoded.
func results(t *testing.T, chunks []session.Chunk) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, c := range chunks {
		if c.Kind() != session.KindToolResult {
			continue
		}
		r, _ := c.ToolResult()
		var body map[string]any
		if err := json.Unmarshal([]byte(r.Content), &body); err != nil {
			// A string result is a JSON string literal.
			body = map[string]any{"raw": r.Content}
		}
		body["_id"] = r.ToolCallID
		out = append(out, body)
	}
	return out
}

func kinds(chunks []session.Chunk) string {
	var ks []string
	for _, c := range chunks {
		ks = append(ks, string(c.Kind()))
	}
	return strings.Join(ks, ",")
}

func extra(t *testing.T, v *session.Version, key string) string {
	t.Helper()
	for _, e := range v.Extras {
		if e.Key == key {
			return string(e.Value)
		}
	}
	return ""
}

func TestStepRunsToolsAndCommitsOneVersion(t *testing.T) {
	t.Parallel()
	echo := &funcTool{name: "echo", call: func(_ context.Context, args json.RawMessage) (any, error) {
		return map[string]any{"echo": byArg(args)}, nil
	}}
	a := newAgent(t, []llm.ScriptReply{
		{Content: "Let me check.", ToolCalls: []session.ToolCall{call("c1", "echo", `{"x":"hi"}`)}},
		{Content: "It said hi."},
	}, echo)
	in := userSession(t, "say hi")
	var deltas []string
	var events []agent.Event
	var mu sync.Mutex
	out, err := a.Step(context.Background(), in, agent.Meta{
		Key:      "run/0",
		Producer: session.Producer{Run: "run", Step: "run/0"},
		OnDelta:  func(d string) { deltas = append(deltas, d) },
		OnEvent:  func(e agent.Event) { mu.Lock(); events = append(events, e); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	v := out.Version()
	if v.Op != session.OpStep || v.Parents[0] != in.ID() {
		t.Fatalf("op %s parents %v", v.Op, v.Parents)
	}
	if got := kinds(v.Chunks); got != "assistant,tool_result,assistant" {
		t.Fatalf("chunks %s", got)
	}
	if r := results(t, v.Chunks); r[0]["echo"] != "hi" || r[0]["_id"] != "c1" {
		t.Fatalf("result %v", r)
	}
	if v.Chunks[2].Text() != "It said hi." {
		t.Fatalf("final %q", v.Chunks[2].Text())
	}
	if strings.Join(deltas, "") != "Let me check.It said hi." {
		t.Fatalf("deltas %q", deltas)
	}
	if len(events) != 2 || events[0].Type != "tool.call" || events[1].Type != "tool.result" || !events[1].OK {
		t.Fatalf("events %+v", events)
	}
	if v.Producer.Agent != "tester" || v.Producer.Model != "scripted" || v.Producer.Run != "run" || v.Key != "run/0" {
		t.Fatalf("producer %+v key %q", v.Producer, v.Key)
	}
	if got := extra(t, v, "loop.stop"); got != `"model"` {
		t.Fatalf("loop.stop %s", got)
	}
	if got := extra(t, v, "loop.rounds"); got != "2" {
		t.Fatalf("loop.rounds %s", got)
	}
	var rounds []session.Usage
	if err := json.Unmarshal([]byte(extra(t, v, "loop.round_usage")), &rounds); err != nil || len(rounds) != 2 {
		t.Fatalf("round usage %s: %v", extra(t, v, "loop.round_usage"), err)
	}
	if sum := rounds[0].Add(rounds[1]); v.Usage != in.Usage().Add(sum) || sum.TotalTokens == 0 {
		t.Fatalf("usage %+v, rounds %+v", v.Usage, rounds)
	}
	// The same step again (a redelivery: the same key and producer) returns
	// the committed version.
	again, err := newAgent(t, a.Provider.(*llm.Scripted).Replies, echo).Step(context.Background(), in,
		agent.Meta{Key: "run/0", Producer: session.Producer{Run: "run", Step: "run/0"}})
	if err != nil || again.ID() != out.ID() {
		t.Fatalf("redelivery: %v, want the committed %s", err, out.ID())
	}
	// Another producer under the same key is not a redelivery: it is refused,
	// never answered with the committed version.
	if _, err := newAgent(t, a.Provider.(*llm.Scripted).Replies, echo).Step(context.Background(), in,
		agent.Meta{Key: "run/0", Producer: session.Producer{Run: "other", Step: "other/0"}}); !errors.Is(err, session.ErrConflict) {
		t.Fatalf("a step of another run under key run/0: %v, want ErrConflict", err)
	}
}

// TestDistinctKeysRunConcurrently shows overlap with a barrier: each call
// waits until every call has started, which only happens if they run at
// the same time. Run serially, the first call would wait forever (the
// test's deadline fails it).
func TestDistinctKeysRunConcurrently(t *testing.T) {
	t.Parallel()
	const n = 3
	var started sync.WaitGroup
	started.Add(n)
	all := make(chan struct{})
	go func() { started.Wait(); close(all) }()
	barrier := &funcTool{name: "barrier", key: byArg, call: func(ctx context.Context, args json.RawMessage) (any, error) {
		started.Done()
		select {
		case <-all:
			return byArg(args), nil
		case <-ctx.Done():
			return nil, errors.New("calls did not overlap")
		}
	}}
	calls := make([]session.ToolCall, n)
	for i := range calls {
		calls[i] = call(fmt.Sprintf("c%d", i), "barrier", fmt.Sprintf(`{"x":"k%d"}`, i))
	}
	a := newAgent(t, []llm.ScriptReply{{ToolCalls: calls}, {Content: "done"}}, barrier)
	a.Spec.Limits.ToolTimeoutSeconds = 30
	out, err := a.Step(context.Background(), userSession(t, "go"), agent.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	rs := results(t, out.Version().Chunks)
	for i, r := range rs {
		if r["raw"] != fmt.Sprintf(`"k%d"`, i) {
			t.Fatalf("result %d: %v", i, r)
		}
	}
}

// TestSameKeyRunsInOrder: calls on one key never overlap and run in the
// model's order; a call on another key runs beside them.
func TestSameKeyRunsInOrder(t *testing.T) {
	t.Parallel()
	var inFlight, maxInFlight atomic.Int32
	var mu sync.Mutex
	var order []string
	serial := &funcTool{name: "serial", key: func(json.RawMessage) string { return "one" },
		call: func(_ context.Context, args json.RawMessage) (any, error) {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for {
				m := maxInFlight.Load()
				if n <= m || maxInFlight.CompareAndSwap(m, n) {
					break
				}
			}
			mu.Lock()
			order = append(order, byArg(args))
			mu.Unlock()
			return true, nil
		}}
	var calls []session.ToolCall
	for i := range 6 {
		calls = append(calls, call(fmt.Sprintf("c%d", i), "serial", fmt.Sprintf(`{"x":"%d"}`, i)))
	}
	a := newAgent(t, []llm.ScriptReply{{ToolCalls: calls}, {Content: "done"}}, serial)
	out, err := a.Step(context.Background(), userSession(t, "go"), agent.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	if maxInFlight.Load() != 1 {
		t.Fatalf("same-key calls overlapped: %d at once", maxInFlight.Load())
	}
	if strings.Join(order, "") != "012345" {
		t.Fatalf("order %v", order)
	}
	for _, r := range results(t, out.Version().Chunks) {
		if r["ok"] != true {
			t.Fatalf("bool result %v", r)
		}
	}
}

// TestResultsInCallOrder: the first call finishes last, yet its result comes
// first.
func TestResultsInCallOrder(t *testing.T) {
	t.Parallel()
	secondDone := make(chan struct{})
	slow := &funcTool{name: "slow", call: func(ctx context.Context, _ json.RawMessage) (any, error) {
		select {
		case <-secondDone:
			return "first", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}
	fast := &funcTool{name: "fast", call: func(context.Context, json.RawMessage) (any, error) {
		defer close(secondDone)
		return "second", nil
	}}
	a := newAgent(t, []llm.ScriptReply{
		{ToolCalls: []session.ToolCall{call("a", "slow", `{}`), call("b", "fast", `{}`)}},
		{Content: "ok"},
	}, slow, fast)
	out, err := a.Step(context.Background(), userSession(t, "go"), agent.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	rs := results(t, out.Version().Chunks)
	if rs[0]["_id"] != "a" || rs[0]["raw"] != `"first"` || rs[1]["_id"] != "b" || rs[1]["raw"] != `"second"` {
		t.Fatalf("results %v", rs)
	}
}

type kindError struct{}

func (kindError) Error() string { return "plain failure" }

func TestErrorKinds(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var abandoned sync.WaitGroup
	tools := []tool.Tool{
		&funcTool{name: "ok", call: func(context.Context, json.RawMessage) (any, error) { return map[string]int{"n": 1}, nil }},
		&funcTool{name: "fails", call: func(context.Context, json.RawMessage) (any, error) { return nil, kindError{} }},
		&funcTool{name: "kinded", call: func(context.Context, json.RawMessage) (any, error) {
			return nil, fmt.Errorf("wrapped: %w", &tool.Error{Kind: tool.KindFileNotFound, Message: "no such file", Detail: "a.txt"})
		}},
		&funcTool{name: "panics", call: func(context.Context, json.RawMessage) (any, error) { panic("boom") }},
		&funcTool{name: "hangs", call: func(ctx context.Context, _ json.RawMessage) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}},
		&funcTool{name: "ignores", call: func(context.Context, json.RawMessage) (any, error) {
			defer abandoned.Done()
			<-release
			return "late", nil
		}},
		&funcTool{name: "huge", call: func(context.Context, json.RawMessage) (any, error) {
			return strings.Repeat("\"x\"", 100000), nil
		}},
		&funcTool{name: "badkey", key: func(json.RawMessage) string { panic("key") },
			call: func(context.Context, json.RawMessage) (any, error) { return nil, nil }},
		&funcTool{name: "unmarshalable", call: func(context.Context, json.RawMessage) (any, error) { return make(chan int), nil }},
	}
	abandoned.Add(1)
	calls := []session.ToolCall{
		call("c0", "ok", `{"x":"a"}`),
		call("c1", "ok", `{not json`),
		call("c2", "ok", ``),
		call("c3", "nope", `{}`),
		call("c4", "ok", `{"x":1}`),
		call("c5", "ok", `{"y":"extra"}`),
		call("c6", "fails", `{}`),
		call("c7", "kinded", `{}`),
		call("c8", "panics", `{}`),
		call("c9", "hangs", `{}`),
		call("c10", "ignores", `{}`),
		call("c11", "huge", `{}`),
		call("c12", "badkey", `{}`),
		call("c13", "unmarshalable", `{}`),
		call("c14", "ok", `[1,2]`),
	}
	a := newAgent(t, []llm.ScriptReply{{ToolCalls: calls}, {Content: "noted"}}, tools...)
	a.Spec.Limits.ToolTimeoutSeconds = 0.2
	out, err := a.Step(context.Background(), userSession(t, "go"), agent.Meta{})
	close(release)
	abandoned.Wait()
	if err != nil {
		t.Fatal(err)
	}
	rs := results(t, out.Version().Chunks)
	if len(rs) != len(calls) {
		t.Fatalf("%d results for %d calls", len(rs), len(calls))
	}
	want := []string{"", "invalid_tool_arguments", "invalid_tool_arguments", "unknown_tool", "invalid_tool_arguments",
		"invalid_tool_arguments", "tool_execution_exception", "file_not_found", "tool_execution_exception", "timeout",
		"timeout", "", "tool_execution_exception", "", "invalid_tool_arguments"}
	for i, r := range rs {
		if r["_id"] != calls[i].ID {
			t.Fatalf("result %d answers %v", i, r["_id"])
		}
		got, _ := r["error_kind"].(string)
		if got != want[i] {
			t.Errorf("call %d (%s): error_kind %q, want %q; body %v", i, calls[i].Function.Name, got, want[i], r)
		}
		if want[i] != "" && (r["ok"] != false || r["message"] == "") {
			t.Errorf("call %d: failure body %v", i, r)
		}
	}
	if rs[0]["n"] != float64(1) {
		t.Errorf("ok result %v", rs[0])
	}
	if !strings.Contains(rs[3]["message"].(string), `"nope"`) {
		t.Errorf("unknown tool message %v", rs[3]["message"])
	}
	if rs[1]["detail"] != "{not json" {
		t.Errorf("invalid args detail %v", rs[1]["detail"])
	}
	if rs[7]["detail"] != "a.txt" {
		t.Errorf("kinded detail %v", rs[7])
	}
	if !strings.Contains(rs[8]["message"].(string), "boom") {
		t.Errorf("panic message %v", rs[8])
	}
	if rs[11]["truncated"] != true || rs[11]["original_bytes"].(float64) < 300000 {
		t.Errorf("huge result not capped: %v", rs[11]["truncated"])
	}
	if rs[13]["type"] != "chan int" {
		t.Errorf("unmarshalable %v", rs[13])
	}
	for _, c := range out.Version().Chunks {
		if r, ok := c.ToolResult(); ok && len(r.Content) > agent.MaxToolResultBytes {
			t.Errorf("tool result of %d bytes", len(r.Content))
		}
	}
	if out.Version().Chunks[len(out.Version().Chunks)-1].Text() != "noted" {
		t.Error("the model did not get a final turn")
	}
}

func TestMaxToolRounds(t *testing.T) {
	t.Parallel()
	noop := &funcTool{name: "noop", call: func(context.Context, json.RawMessage) (any, error) { return true, nil }}
	var replies []llm.ScriptReply
	for range 5 {
		replies = append(replies, llm.ScriptReply{ToolCalls: []session.ToolCall{{Function: session.FunctionCall{Name: "noop", Arguments: "{}"}}}})
	}
	a := newAgent(t, replies, noop)
	a.Spec.Limits.MaxToolRounds = 2
	out, err := a.Step(context.Background(), userSession(t, "loop"), agent.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	v := out.Version()
	if got := kinds(v.Chunks); got != "assistant,tool_result,assistant,tool_result,note" {
		t.Fatalf("chunks %s", got)
	}
	if extra(t, v, "loop.truncated") != "true" || extra(t, v, "loop.stop") != `"max_tool_rounds"` {
		t.Fatalf("extras %v", v.Extras)
	}
	if !strings.Contains(v.Chunks[4].Text(), "max_tool_rounds") {
		t.Fatalf("note %s", v.Chunks[4].Text())
	}
}

func TestBudgets(t *testing.T) {
	t.Parallel()
	noop := &funcTool{name: "noop", call: func(context.Context, json.RawMessage) (any, error) { return true, nil }}
	loop := func() []llm.ScriptReply {
		var rs []llm.ScriptReply
		for range 10 {
			rs = append(rs, llm.ScriptReply{Content: "more words here", ToolCalls: []session.ToolCall{{Function: session.FunctionCall{Name: "noop", Arguments: "{}"}}}})
		}
		return rs
	}
	for _, tc := range []struct {
		name   string
		limits agent.Limits
		price  agent.Pricing
		run    agent.Budget
		stop   string
		rounds string
	}{
		{name: "step tokens", limits: agent.Limits{MaxTokens: 20}, stop: agent.StopStepTokens},
		{name: "step cost", limits: agent.Limits{MaxCostUSD: 0.0001}, price: agent.Pricing{InputPerMTok: 10, OutputPerMTok: 10}, stop: agent.StopStepCost},
		{name: "run tokens", run: agent.Budget{MaxTokens: 100, UsedTokens: 95}, stop: agent.StopRunTokens, rounds: "1"},
		{name: "run spent", run: agent.Budget{MaxTokens: 100, UsedTokens: 100}, stop: agent.StopRunTokens, rounds: "0"},
		{name: "run cost", run: agent.Budget{MaxCostUSD: 0.001, UsedCostUSD: 0.00099}, price: agent.Pricing{InputPerMTok: 1000}, stop: agent.StopRunCost, rounds: "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := newAgent(t, loop(), noop)
			a.Spec.Limits, a.Spec.Pricing = tc.limits, tc.price
			out, err := a.Step(context.Background(), userSession(t, "spend"), agent.Meta{Run: tc.run})
			if err != nil {
				t.Fatal(err)
			}
			v := out.Version()
			if got := extra(t, v, "budget.exceeded"); got != `"`+tc.stop+`"` {
				t.Fatalf("budget.exceeded %s, want %s; chunks %s", got, tc.stop, kinds(v.Chunks))
			}
			if tc.rounds != "" && extra(t, v, "loop.rounds") != tc.rounds {
				t.Fatalf("rounds %s, want %s", extra(t, v, "loop.rounds"), tc.rounds)
			}
			last := v.Chunks[len(v.Chunks)-1]
			if last.Kind() != session.KindNote || !strings.Contains(last.Text(), tc.stop) {
				t.Fatalf("last chunk %s %s", last.Kind(), last.Text())
			}
			// Every tool call is answered: the transcript stays valid.
			answered := map[string]bool{}
			for _, c := range v.Chunks {
				if r, ok := c.ToolResult(); ok {
					answered[r.ToolCallID] = true
				}
			}
			for _, c := range v.Chunks {
				for _, tc := range c.ToolCalls() {
					if !answered[tc.ID] {
						t.Fatalf("call %s unanswered", tc.ID)
					}
				}
			}
		})
	}
}

func TestNoToolsAnswersUnknownTool(t *testing.T) {
	t.Parallel()
	a := &agent.Agent{
		Spec: agent.Spec{Name: "plain", Model: "scripted"},
		Provider: &llm.Scripted{Replies: []llm.ScriptReply{
			{ToolCalls: []session.ToolCall{call("c", "rm_rf", `{}`)}},
			{Content: "sorry"},
		}},
	}
	out, err := a.Forward(context.Background(), userSession(t, "x"))
	if err != nil {
		t.Fatal(err)
	}
	if rs := results(t, out.Version().Chunks); rs[0]["error_kind"] != "unknown_tool" {
		t.Fatalf("%v", rs)
	}
}

func TestModelErrorCommitsNothing(t *testing.T) {
	t.Parallel()
	g := session.NewMemoryGraph()
	in, err := session.FromUserMessage(context.Background(), g, "x")
	if err != nil {
		t.Fatal(err)
	}
	a := &agent.Agent{Spec: agent.Spec{Name: "a", Model: "scripted"}, Provider: &llm.Scripted{}}
	if _, err := a.Step(context.Background(), in, agent.Meta{Key: "k"}); !errors.Is(err, llm.ErrScriptExhausted) {
		t.Fatalf("err %v", err)
	}
	if n := len(g.Versions()); n != 1 {
		t.Fatalf("%d versions after a failed step", n)
	}
}

func TestPlacementHook(t *testing.T) {
	t.Parallel()
	a := newAgent(t, []llm.ScriptReply{{Content: "hi"}})
	want := session.Placement{Backend: "local", Snapshot: "sha256:abc"}
	out, err := a.Step(context.Background(), userSession(t, "x"), agent.Meta{
		Placement: func(context.Context) (session.Placement, error) { return want, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.Placement().Snapshot != want.Snapshot {
		t.Fatalf("placement %+v", out.Placement())
	}
	_, err = a.Step(context.Background(), userSession(t, "x"), agent.Meta{
		Placement: func(context.Context) (session.Placement, error) {
			return session.Placement{}, errors.New("snapshot failed")
		},
	})
	if err == nil || !strings.Contains(err.Error(), "snapshot failed") {
		t.Fatalf("err %v", err)
	}
}

func TestStepTimeoutBeatsHungModel(t *testing.T) {
	t.Parallel()
	a := newAgent(t, []llm.ScriptReply{{Content: "late", DelayMS: 60000}})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := a.Step(ctx, userSession(t, "x"), agent.Meta{}); err == nil {
		t.Fatal("no error")
	}
}
