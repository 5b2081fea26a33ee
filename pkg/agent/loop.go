package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/memory"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/tool"
)

// Stop reasons a [Result] carries, also recorded as the "loop.stop" extra.
const (
	// StopModel: the model answered without tool calls.
	StopModel = "model"
	// StopMaxRounds: limits.max_tool_rounds model calls were made and the
	// model still asked for tools ("loop.truncated" is recorded too).
	StopMaxRounds = "max_tool_rounds"
	// StopStepTokens, StopStepCost, StopRunTokens, StopRunCost: a budget
	// was crossed.
	StopStepTokens = "step_tokens"
	StopStepCost   = "step_cost"
	StopRunTokens  = "run_tokens"
	StopRunCost    = "run_cost"
)

// Result is what one run of the loop produced, before it is committed.
type Result struct {
	// Chunks are the new chunks, in transcript order.
	Chunks []session.Chunk
	// Usage is the step's total; Rounds holds each model call's.
	Usage  session.Usage
	Rounds []session.Usage
	// CostUSD is the step's cost under the spec's pricing (0 without one).
	CostUSD float64
	// Agent is the spec's name; Model the model that answered last.
	Agent, Model string
	// Stop says why the loop ended (a Stop constant).
	Stop string
	// Pending are the calls waiting for a decision (Stop is StopApproval).
	Pending []PendingCall

	// policy counts the step's calls for the tool policy.
	policy *policyState
}

// Extension returns the version the result commits as.
func (r Result) Extension(m Meta) session.Extension {
	p := m.Producer
	p.Agent, p.Model = r.Agent, r.Model
	extras := []session.Extra{
		session.StringExtra("loop.stop", r.Stop),
		rawExtra("loop.rounds", len(r.Rounds)),
		session.UsagesExtra("loop.round_usage", r.Rounds),
	}
	if r.CostUSD > 0 {
		extras = append(extras, rawExtra("loop.cost_usd", r.CostUSD))
	}
	if r.Stop == StopMaxRounds {
		extras = append(extras, rawExtra("loop.truncated", true))
	}
	if isBudgetStop(r.Stop) {
		extras = append(extras, session.StringExtra("budget.exceeded", r.Stop))
	}
	if r.Stop == StopApproval {
		extras = append(extras, rawExtra(ExtraPending, r.Pending))
	}
	return session.Extension{
		Op:       session.OpStep,
		Chunks:   r.Chunks,
		Usage:    r.Usage,
		Producer: p,
		Extras:   extras,
		Key:      m.Key,
	}
}

func isBudgetStop(s string) bool {
	return s == StopStepTokens || s == StopStepCost || s == StopRunTokens || s == StopRunCost
}

func rawExtra(key string, v any) session.Extra {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte("null")
	}
	return session.Extra{Key: key, Value: b}
}

// Run runs the agent loop on s without committing anything:
//
//  1. send the instructions, s's transcript and the chunks made so far,
//     with the tool schemas sorted by name;
//  2. record the reply as one assistant chunk (its text and tool calls);
//  3. run the tool calls (see [runTools]) and record one tool_result chunk
//     per call, in the model's call order;
//  4. repeat until the model answers without tool calls, a budget is
//     crossed, or limits.max_tool_rounds model calls were made.
//
// A budget stop or a round limit ends the loop cleanly: the reason is
// recorded as a note chunk, and tool calls the model made in the last reply
// are answered with error bodies (error_kind budget_exceeded), so the
// transcript stays a valid conversation. An empty reply, a refusal and a
// content-filter stop are recorded as a note beside the assistant chunk.
// Model errors are returned (the step fails or is retried); nothing is
// recorded for them.
func (a *Agent) Run(ctx context.Context, s session.Session, m Meta) (Result, error) {
	chunks, err := s.Chunks(ctx)
	if err != nil {
		return Result{}, err
	}
	model := a.Model
	if model == "" {
		model = a.Spec.Model
	}
	msgs := make([]llm.Message, 0, len(chunks)+8)
	if a.Spec.Instructions != "" {
		msgs = append(msgs, llm.Message{Role: llm.RoleSystem, Content: a.Spec.Instructions})
	}
	res := Result{Agent: a.Spec.Name, Model: model}
	if m.rp, err = loadJournal(ctx, m); err != nil {
		return Result{}, err
	}
	if m.rp != nil {
		network := m.Network
		// A tool that runs commands is idempotent only without network.
		m.rp.networked = func(t tool.Tool) bool { return network && t.Def().Network && a.idempotent(t) }
		m.rp.idem = func(t tool.Tool) bool { return a.idempotent(t) && !m.rp.networked(t) }
		m.rp.workspace = func(t tool.Tool) bool { return !t.Def().ReadOnly && !a.isMCP(t) }
		m.rp.sandboxed = m.Sandbox != nil
	}
	// Memory recalled with the last user message: recorded as a
	// memory_recall chunk, shown to the model as a system message.
	// The recall acts for s: a store shared by tenants confines it to s's.
	if c, text, ok := a.recall(memory.WithVersion(ctx, s.ID().String()), chunks); ok {
		res.Chunks = append(res.Chunks, c)
		if text != "" {
			msgs = append(msgs, llm.Message{Role: llm.RoleSystem, Content: text})
		}
	}
	msgs = append(msgs, llm.MessagesFromChunks(chunks)...)
	var tools []llm.Tool
	for _, d := range a.Tools.Defs() {
		tools = append(tools, llm.Tool{Name: d.Name, Description: d.Description, Parameters: d.Parameters})
	}
	// add records a model-facing chunk and the message it becomes (built
	// directly rather than decoded back from the chunk: this is the loop's
	// hot path).
	add := func(c session.Chunk, m llm.Message) {
		res.Chunks = append(res.Chunks, c)
		msgs = append(msgs, m)
	}
	addResult := func(r session.ToolResult) {
		add(session.ToolResultChunk(r), llm.Message{Role: llm.RoleTool, Content: r.Content, ToolCallID: r.ToolCallID})
	}
	note := func(body map[string]any) {
		c, err := session.Evidence(session.KindNote, body)
		if err == nil {
			res.Chunks = append(res.Chunks, c)
		}
	}
	maxRounds := a.Spec.Limits.maxToolRounds()
	// A transcript that ends in tool calls the loop stopped before (it
	// waited for approval) finishes that round first, with the decisions
	// recorded after it.
	if open, decided := Pending(chunks); len(open) > 0 && (len(decided) > 0 || a.anyNeedsApproval(open)) {
		ok, err := a.settle(ctx, 0, open, decided, m, &res, addResult)
		if err != nil {
			return Result{}, err
		}
		if !ok {
			return res, nil
		}
	}
	// A run that has nothing left does not call the model at all.
	if stop, detail := a.overBudget(res, m.Run, true); stop != "" {
		res.Stop = stop
		note(detail)
		return res, nil
	}
	for round := 0; ; round++ {
		if round == maxRounds {
			res.Stop = StopMaxRounds
			note(map[string]any{"event": "loop.truncated", "reason": StopMaxRounds, "limit": maxRounds,
				"message": fmt.Sprintf("the model still asked for tools after %d model calls (limits.max_tool_rounds)", maxRounds)})
			return res, nil
		}
		resp, replayed := m.rp.reply(round + 1)
		if !replayed {
			req := a.request(model, msgs, tools)
			if st, ok := a.Provider.(llm.Streamer); ok && m.OnDelta != nil {
				resp, err = st.ChatStream(ctx, req, m.OnDelta)
			} else {
				resp, err = a.Provider.Chat(ctx, req)
			}
			if err != nil {
				return Result{}, fmt.Errorf("agent %s: model %s (round %d): %w", a.Spec.Name, model, round+1, err)
			}
			if err := m.rp.recordReply(ctx, round+1, resp); err != nil {
				return Result{}, fmt.Errorf("agent %s: %w", a.Spec.Name, err)
			}
		}
		if resp.Model != "" {
			res.Model = resp.Model
		}
		res.Usage = res.Usage.Add(resp.Usage)
		res.Rounds = append(res.Rounds, resp.Usage)
		res.CostUSD += a.Spec.Pricing.cost(resp.Usage)
		ac := resp.Chunk()
		add(ac, llm.Message{Role: llm.RoleAssistant, Content: ac.Text(), ToolCalls: resp.ToolCalls})
		switch {
		case resp.FinishReason == llm.FinishContentFilter:
			note(map[string]any{"event": "content_filter", "round": round + 1,
				"message": "the endpoint's content filter stopped the reply"})
		case resp.Refusal != "" && resp.Content == "" && len(resp.ToolCalls) == 0:
			note(map[string]any{"event": "refusal", "round": round + 1, "refusal": resp.Refusal})
		case resp.FinishReason == llm.FinishLength:
			note(map[string]any{"event": "length", "round": round + 1,
				"message": "the reply was cut at the model's token limit (params.max_tokens or the endpoint's)"})
		case resp.Content == "" && len(resp.ToolCalls) == 0:
			note(map[string]any{"event": "empty_response", "round": round + 1, "finish_reason": resp.FinishReason,
				"message": "the model returned neither text nor tool calls"})
		}
		if stop, detail := a.overBudget(res, m.Run, false); stop != "" {
			for _, c := range resp.ToolCalls {
				addResult(session.ToolResult{ToolCallID: c.ID, Name: c.Function.Name,
					Content: errorBody(&tool.Error{Kind: KindBudgetExceeded, Message: fmt.Sprintf("not run: %v", detail["message"])})})
			}
			res.Stop = stop
			note(detail)
			return res, nil
		}
		if len(resp.ToolCalls) == 0 {
			res.Stop = StopModel
			return res, nil
		}
		ok, err := a.settle(ctx, round+1, resp.ToolCalls, nil, m, &res, addResult)
		if err != nil {
			return Result{}, err
		}
		if !ok {
			return res, nil
		}
		if err := m.rp.endRound(ctx, round+1); err != nil {
			return Result{}, fmt.Errorf("agent %s: %w", a.Spec.Name, err)
		}
	}
}

func (a *Agent) anyNeedsApproval(calls []session.ToolCall) bool {
	for _, c := range calls {
		if a.needsApproval(c.Function.Name) {
			return true
		}
	}
	return false
}

// KindBudgetExceeded is the error kind of tool calls left unrun because a
// budget was crossed.
const KindBudgetExceeded = "budget_exceeded"

func (a *Agent) request(model string, msgs []llm.Message, tools []llm.Tool) llm.Request {
	p := a.Spec.Params
	req := llm.Request{
		Model:           model,
		Messages:        msgs,
		Tools:           tools,
		Temperature:     p.Temperature,
		MaxTokens:       p.MaxTokens,
		Seed:            p.Seed,
		Stop:            p.Stop,
		ReasoningEffort: p.ReasoningEffort,
		ResponseFormat:  p.ResponseFormat,
		Extra:           p.Extra,
	}
	if len(tools) > 0 {
		req.ToolChoice = p.ToolChoice
		req.ParallelToolCalls = p.ParallelToolCalls
	}
	return req
}

// overBudget reports the first budget res has crossed, with a note body.
// At the start of a step (start true) a run with nothing left counts as
// crossed, so the step makes no model call.
func (a *Agent) overBudget(res Result, run Budget, start bool) (string, map[string]any) {
	lim := a.Spec.Limits
	over := func(stop, what string, used, limit any) (string, map[string]any) {
		return stop, map[string]any{"event": "budget.exceeded", "budget": stop, "used": used, "limit": limit,
			"message": fmt.Sprintf("%s budget is spent: used %v of %v", what, used, limit)}
	}
	runTokens := run.UsedTokens + res.Usage.TotalTokens
	runCost := run.UsedCostUSD + res.CostUSD
	switch {
	case lim.MaxTokens > 0 && res.Usage.TotalTokens > lim.MaxTokens:
		return over(StopStepTokens, "the step's token", res.Usage.TotalTokens, lim.MaxTokens)
	case lim.MaxCostUSD > 0 && res.CostUSD > lim.MaxCostUSD:
		return over(StopStepCost, "the step's cost (USD)", res.CostUSD, lim.MaxCostUSD)
	case run.MaxTokens > 0 && (runTokens > run.MaxTokens || start && runTokens >= run.MaxTokens):
		return over(StopRunTokens, "the run's token", runTokens, run.MaxTokens)
	case run.MaxCostUSD > 0 && (runCost > run.MaxCostUSD || start && runCost >= run.MaxCostUSD):
		return over(StopRunCost, "the run's cost (USD)", runCost, run.MaxCostUSD)
	}
	return "", nil
}
