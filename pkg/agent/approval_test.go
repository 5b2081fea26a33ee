package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/tool"
)

// gatedTool counts its executions; it declares NeedsApproval when gated.
type gatedTool struct {
	name  string
	gated bool
	runs  atomic.Int32
}

func (g *gatedTool) Def() tool.Def {
	return tool.Def{Name: g.name, Description: "counts calls", NeedsApproval: g.gated,
		Parameters: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}},"additionalProperties":false}`)}
}
func (g *gatedTool) ResourceKey(json.RawMessage) string { return g.name }
func (g *gatedTool) Call(context.Context, tool.Env, json.RawMessage) (any, error) {
	g.runs.Add(1)
	return map[string]any{"ran": g.name}, nil
}

// approvalScript: one round calling deploy (gated) and ls (not gated),
// then an answer.
func approvalScript() []llm.ScriptReply {
	return []llm.ScriptReply{
		{Content: "Deploying.", ToolCalls: []session.ToolCall{call("c1", "deploy", `{"x":"prod"}`), call("c2", "ls", `{}`)}},
		{Content: "Done."},
	}
}

// waitStep runs the first step and checks that it paused before running
// anything, returning the committed waiting version.
func waitStep(t *testing.T, a *agent.Agent, deploy, ls *gatedTool) session.Session {
	t.Helper()
	var events []agent.Event
	_, err := a.Step(context.Background(), userSession(t, "deploy it"), agent.Meta{Key: "run/0",
		OnEvent: func(e agent.Event) { events = append(events, e) }})
	var ae *agent.ApprovalError
	if !errors.As(err, &ae) || !errors.Is(err, agent.ErrNeedsApproval) {
		t.Fatalf("err = %v, want an *ApprovalError", err)
	}
	if deploy.runs.Load() != 0 || ls.runs.Load() != 0 {
		t.Fatalf("executions while waiting: deploy %d, ls %d; want 0, 0", deploy.runs.Load(), ls.runs.Load())
	}
	if len(ae.Pending) != 1 || ae.Pending[0].CallID != "c1" || ae.Pending[0].Tool != "deploy" || ae.Pending[0].Arguments != `{"x":"prod"}` {
		t.Fatalf("pending = %+v", ae.Pending)
	}
	v := ae.Session.Version()
	if got := kinds(v.Chunks); got != "assistant" {
		t.Fatalf("waiting version chunks = %s, want the assistant's calls only", got)
	}
	if got := extra(t, v, "loop.stop"); got != `"approval"` {
		t.Fatalf("loop.stop = %s", got)
	}
	if got := extra(t, v, agent.ExtraPending); !strings.Contains(got, `"call_id":"c1"`) {
		t.Fatalf("approval.pending = %s", got)
	}
	if len(events) != 1 || events[0].Type != "approval.pending" || events[0].CallID != "c1" {
		t.Fatalf("events = %+v", events)
	}
	return ae.Session
}

func decide(t *testing.T, s session.Session, ds ...agent.Decision) session.Session {
	t.Helper()
	var cs []session.Chunk
	for _, d := range ds {
		c, err := agent.ApprovalChunk(d)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	out, err := s.Append(context.Background(), cs...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func approvalAgent(t *testing.T) (*agent.Agent, *gatedTool, *gatedTool) {
	deploy, ls := &gatedTool{name: "deploy", gated: true}, &gatedTool{name: "ls"}
	return newAgent(t, approvalScript(), deploy, ls), deploy, ls
}

func TestApprovalWaitsThenApprovedCallRuns(t *testing.T) {
	t.Parallel()
	a, deploy, ls := approvalAgent(t)
	waiting := waitStep(t, a, deploy, ls)

	// Forwarding the waiting version again without a decision runs
	// nothing and commits nothing.
	_, err := a.Step(context.Background(), waiting, agent.Meta{Key: "run/0/c1"})
	var ae *agent.ApprovalError
	if !errors.As(err, &ae) || ae.Session.ID() != waiting.ID() {
		t.Fatalf("undecided re-forward: err = %v", err)
	}
	if deploy.runs.Load() != 0 || ls.runs.Load() != 0 {
		t.Fatal("a call ran without a decision")
	}

	approved := decide(t, waiting, agent.Decision{CallID: "c1", Tool: "deploy", Decision: agent.DecisionApproved, By: "alice"})
	out, err := a.Step(context.Background(), approved, agent.Meta{Key: "run/0/c1"})
	if err != nil {
		t.Fatal(err)
	}
	if deploy.runs.Load() != 1 || ls.runs.Load() != 1 {
		t.Fatalf("after approval: deploy ran %d, ls %d; want 1, 1", deploy.runs.Load(), ls.runs.Load())
	}
	v := out.Version()
	if got := kinds(v.Chunks); got != "tool_result,tool_result,assistant" {
		t.Fatalf("continuation chunks = %s", got)
	}
	rs := results(t, v.Chunks)
	if rs[0]["_id"] != "c1" || rs[0]["ran"] != "deploy" || rs[1]["_id"] != "c2" || rs[1]["ran"] != "ls" {
		t.Fatalf("results = %v", rs)
	}
	if out.Version().Chunks[2].Text() != "Done." {
		t.Fatalf("answer = %q", out.Version().Chunks[2].Text())
	}
}

func TestApprovalRejectedCallAnsweredWithReason(t *testing.T) {
	t.Parallel()
	a, deploy, ls := approvalAgent(t)
	waiting := waitStep(t, a, deploy, ls)
	rejected := decide(t, waiting, agent.Decision{CallID: "c1", Tool: "deploy", Decision: agent.DecisionRejected, Reason: "not on a Friday", By: "bob"})
	out, err := a.Step(context.Background(), rejected, agent.Meta{Key: "run/0/c1"})
	if err != nil {
		t.Fatal(err)
	}
	if deploy.runs.Load() != 0 {
		t.Fatal("a rejected call ran")
	}
	if ls.runs.Load() != 1 {
		t.Fatalf("ls ran %d times, want 1", ls.runs.Load())
	}
	rs := results(t, out.Version().Chunks)
	if rs[0]["error_kind"] != tool.KindRejected || rs[0]["ok"] != false ||
		!strings.Contains(rs[0]["message"].(string), "not on a Friday") || !strings.Contains(rs[0]["message"].(string), "bob") {
		t.Fatalf("rejected body = %v", rs[0])
	}
}

func TestApproverDecidesInProcess(t *testing.T) {
	t.Parallel()
	a, deploy, ls := approvalAgent(t)
	var asked []agent.PendingCall
	a.Approver = agent.ApproverFunc(func(_ context.Context, calls []agent.PendingCall) ([]agent.Decision, error) {
		asked = append(asked, calls...)
		return []agent.Decision{{CallID: "c1", Decision: agent.DecisionApproved, By: "sdk"}}, nil
	})
	out, err := a.Step(context.Background(), userSession(t, "deploy it"), agent.Meta{Key: "run/0"})
	if err != nil {
		t.Fatal(err)
	}
	if len(asked) != 1 || asked[0].CallID != "c1" {
		t.Fatalf("asked = %+v", asked)
	}
	if deploy.runs.Load() != 1 || ls.runs.Load() != 1 {
		t.Fatalf("deploy %d, ls %d", deploy.runs.Load(), ls.runs.Load())
	}
	v := out.Version()
	if got := kinds(v.Chunks); got != "assistant,approval,tool_result,tool_result,assistant" {
		t.Fatalf("chunks = %s", got)
	}
	d, err := agent.ParseApproval(v.Chunks[1])
	if err != nil || d.CallID != "c1" || d.Tool != "deploy" || !d.Approved() || d.By != "sdk" {
		t.Fatalf("approval chunk = %+v, %v", d, err)
	}
}

func TestApproverMustDecideEveryCall(t *testing.T) {
	t.Parallel()
	a, deploy, _ := approvalAgent(t)
	a.Approver = agent.ApproverFunc(func(context.Context, []agent.PendingCall) ([]agent.Decision, error) {
		return nil, nil
	})
	_, err := a.Step(context.Background(), userSession(t, "deploy it"), agent.Meta{Key: "run/0"})
	if err == nil || !strings.Contains(err.Error(), "no decision for call c1") {
		t.Fatalf("err = %v", err)
	}
	if deploy.runs.Load() != 0 {
		t.Fatal("deploy ran")
	}
}

// An approval recorded for an earlier round does not approve a later call
// that reuses its id.
func TestApprovalDoesNotCarryOverToLaterRounds(t *testing.T) {
	t.Parallel()
	deploy := &gatedTool{name: "deploy", gated: true}
	a := newAgent(t, []llm.ScriptReply{
		{ToolCalls: []session.ToolCall{call("c1", "deploy", `{"x":"staging"}`)}},
		{ToolCalls: []session.ToolCall{call("c1", "deploy", `{"x":"prod"}`)}},
		{Content: "Done."},
	}, deploy)
	_, err := a.Step(context.Background(), userSession(t, "deploy"), agent.Meta{Key: "k0"})
	var ae *agent.ApprovalError
	if !errors.As(err, &ae) {
		t.Fatal(err)
	}
	approved := decide(t, ae.Session, agent.Decision{CallID: "c1", Tool: "deploy", Decision: agent.DecisionApproved})
	_, err = a.Step(context.Background(), approved, agent.Meta{Key: "k1"})
	if !errors.As(err, &ae) || ae.Pending[0].Arguments != `{"x":"prod"}` {
		t.Fatalf("second round: err = %v", err)
	}
	if deploy.runs.Load() != 1 {
		t.Fatalf("deploy ran %d times, want 1 (staging only)", deploy.runs.Load())
	}
}

func TestSpecApproveNamesTools(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		approve []string
		mcp     []agent.MCPServer
		tool    string
		waits   bool
	}{
		{approve: []string{"ls"}, tool: "ls", waits: true},
		{approve: []string{"*"}, tool: "ls", waits: true},
		{approve: []string{"other"}, tool: "ls", waits: false},
		{mcp: []agent.MCPServer{{Name: "files", Command: "x", Approve: true}}, tool: "files__read", waits: true},
		{mcp: []agent.MCPServer{{Name: "files", Command: "x"}}, tool: "files__read", waits: false},
		// A tool the agent does not offer never waits: it is answered
		// unknown_tool.
		{approve: []string{"*"}, tool: "nosuch", waits: false},
	} {
		offered := &gatedTool{name: tc.tool}
		if tc.tool == "nosuch" {
			offered = &gatedTool{name: "ls"}
		}
		a := newAgent(t, []llm.ScriptReply{{ToolCalls: []session.ToolCall{call("c1", tc.tool, `{}`)}}, {Content: "ok"}}, offered)
		a.Spec.Approve, a.Spec.MCP = tc.approve, tc.mcp
		_, err := a.Step(context.Background(), userSession(t, "go"), agent.Meta{})
		if waits := errors.Is(err, agent.ErrNeedsApproval); waits != tc.waits || (!tc.waits && err != nil) {
			t.Errorf("approve %v mcp %v tool %s: err = %v, want waits %v", tc.approve, tc.mcp, tc.tool, err, tc.waits)
		}
		if tc.waits && offered.runs.Load() != 0 {
			t.Errorf("tool %s ran while waiting", tc.tool)
		}
	}
}

func TestParseApprovalRefusesBadDecisions(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"call_id":"c1","tool":"t","decision":"maybe"}`,
		`{"call_id":"","tool":"t","decision":"approved"}`,
		`{"call_id":"c1","decision":"approved"}`,
		`{"call_id":"c1","tool":"t","decision":"approved","extra":1}`,
	} {
		c, err := session.NewChunk(session.KindApproval, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := agent.ParseApproval(c); err == nil {
			t.Errorf("%s: accepted", body)
		}
	}
	if _, err := agent.ApprovalChunk(agent.Decision{CallID: "c1", Tool: "t", Decision: "yes"}); !errors.Is(err, session.ErrInvalidChunk) || !strings.Contains(err.Error(), "decision") {
		t.Errorf("ApprovalChunk: err = %v", err)
	}
}
