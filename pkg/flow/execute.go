package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/memory"
	"github.com/rath-run/rath/pkg/sandbox"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/tool"
)

// DefaultCompressInstruction is the final user message of a compress call
// whose [Call.Instruction] is empty (OpenRath's default, paraphrased).
const DefaultCompressInstruction = "Compress the conversation above into a shorter narrative that preserves " +
	"every fact, decision, goal and open task. Write plain text, without role labels."

// DefaultSelectInstruction is a selector's system prompt when its spec has
// no instructions: OpenRath's router rubric.
const DefaultSelectInstruction = "You are a router. Given the conversation and a numbered menu of candidate " +
	"workflows, reply with the index of the single best workflow to run next, or -1 if none applies or the " +
	"task is complete. Reply with the number only."

// ErrBadReply means a selector's or compressor's model reply cannot be used (it
// called tools, stopped for another reason than stop/length/content_filter,
// or was empty). Retrying the same request will not help.
var ErrBadReply = errors.New("rath: unusable model reply")

// ErrBudgetExceeded means the run's budget was spent before a selector or
// compressor step, so it made no model call.
var ErrBudgetExceeded = errors.New("rath: run budget exceeded")

// ResolveFunc builds the provider for an agent spec and returns the model
// name to call.
type ResolveFunc func(spec agent.Spec) (llm.Provider, string, error)

// WorkspaceFunc opens the sandbox an agent step's tools run in, for the
// step's input version. done is called exactly once: ok true when the step
// is about to commit (the placement it returns is recorded, a workspace
// snapshot for instance), false when it failed (done then only releases).
type WorkspaceFunc func(ctx context.Context, in *session.Version) (sb sandbox.Sandbox, done func(ctx context.Context, ok bool) (session.Placement, error), err error)

// Env is what [Execute] needs from the process it runs in. Only Resolve is
// required.
type Env struct {
	// Resolve builds the provider for a spec.
	Resolve ResolveFunc
	// Tools holds the tools agents choose by name (spec.tools); nil means
	// an agent naming tools fails.
	Tools *tool.Registry
	// MCP returns the tools of the MCP servers a spec names; nil means a
	// spec naming servers fails.
	MCP func(ctx context.Context, servers []agent.MCPServer) ([]tool.Tool, error)
	// Memory is the store `memory: local` binds; nil means a spec binding
	// memory fails.
	Memory memory.Store
	// Workspace opens the sandbox of an agent step with tools; nil means
	// tools run without one (sandbox tools then fail with no_sandbox).
	Workspace WorkspaceFunc
	// Producer is recorded on committed versions (Step defaults to the
	// step key, Agent and Model are filled in).
	Producer session.Producer
	// Budget is the run's budget as this step sees it.
	Budget agent.Budget
	// OnDelta and OnEvent receive an agent step's text deltas and tool
	// events (see [agent.Meta]).
	OnDelta func(string)
	OnEvent func(agent.Event)
}

// Execute runs one step: it forwards in through call and commits the
// output with key as its idempotency key (a key already committed returns
// that version, see [session.Graph]). It is the executor both runtimes
// share: the in-process runtime calls it directly, a worker calls it for a
// step job.
//
//   - [KindAgent]: the agent loop ([agent.Agent.Step]), op step.
//   - [KindSelect]: one model call, tools off: the selector's
//     instructions (or [DefaultSelectInstruction]), the transcript, then a
//     user message listing the candidates ("Candidate workflows:\n0: …\n1:
//     …\n\nReply with one index, or -1."). The first integer of the reply
//     ([ParseChoice]) is the choice. The step commits a version (op step)
//     whose one chunk is a selector_decision ([Decision]).
//   - [KindCompress]: one model call, tools off: the compressor's
//     instructions, the transcript, then a user message with the
//     instruction (or [DefaultCompressInstruction]). The step commits a
//     version of op compress whose parent is in and whose transcript is one
//     summary chunk {"content": reply}.
//   - [KindVerify]: no model call: the verifier's command runs in the
//     sandbox env.Workspace opens for in (the branch's workspace), and the
//     step commits a version (op step) whose one chunk is the label chunk
//     of its score ([VerifierScore], [trainset.LabelChunk]).
//
// A selector or compressor reply with tool calls, an empty one or one that
// finished otherwise than stop/length/content_filter is [ErrBadReply].
func Execute(ctx context.Context, env Env, key string, call Call, in session.Session) (session.Session, error) {
	if env.Resolve == nil {
		return session.Session{}, errors.New("flow: execute: Env.Resolve is required")
	}
	if in.IsZero() {
		return session.Session{}, errors.New("flow: execute: input session is zero")
	}
	if err := call.Validate(); err != nil {
		return session.Session{}, err
	}
	prod := env.Producer
	if prod.Step == "" {
		prod.Step = key
	}
	if call.Kind == KindVerify {
		// A verifier calls no model: its command runs in the workspace.
		return executeVerify(ctx, env, key, call, prod, in)
	}
	provider, model, err := env.Resolve(call.Agent)
	if err != nil {
		return session.Session{}, fmt.Errorf("resolve model %q: %w", call.Agent.Model, err)
	}
	switch call.Kind {
	case KindAgent:
		return executeAgent(ctx, env, key, call.Agent, provider, model, prod, in)
	case KindSelect:
		return executeSelect(ctx, env, key, call, provider, model, prod, in)
	default:
		return executeCompress(ctx, env, key, call, provider, model, prod, in)
	}
}

func executeAgent(ctx context.Context, env Env, key string, spec agent.Spec, provider llm.Provider, model string,
	prod session.Producer, in session.Session,
) (session.Session, error) {
	var tools *tool.Set
	if len(spec.Tools) > 0 {
		if env.Tools == nil {
			return session.Session{}, fmt.Errorf("agent %s: tools: this runtime has no tool registry", spec.Name)
		}
		var err error
		if tools, err = env.Tools.Select(spec.Tools); err != nil {
			return session.Session{}, fmt.Errorf("agent %s: %w", spec.Name, err)
		}
	}
	if len(spec.MCP) > 0 {
		if env.MCP == nil {
			return session.Session{}, fmt.Errorf("agent %s: mcp: this runtime runs no MCP servers", spec.Name)
		}
		extra, err := env.MCP(ctx, spec.MCP)
		if err != nil {
			return session.Session{}, fmt.Errorf("agent %s: %w", spec.Name, err)
		}
		if tools, err = tool.NewSet(append(tools.Tools(), extra...)...); err != nil {
			return session.Session{}, fmt.Errorf("agent %s: mcp: %w", spec.Name, err)
		}
	}
	a := &agent.Agent{Spec: spec, Provider: provider, Model: model, Tools: tools}
	if spec.Memory.Store != "" {
		if env.Memory == nil {
			return session.Session{}, fmt.Errorf("agent %s: memory.store %q: this runtime has no memory store", spec.Name, spec.Memory.Store)
		}
		a.Memory = env.Memory
	}
	meta := agent.Meta{Key: key, Producer: prod, OnDelta: env.OnDelta, OnEvent: env.OnEvent, Run: env.Budget}
	if tools.Len() > 0 && env.Workspace != nil {
		sb, done, err := env.Workspace(ctx, in.Version())
		if err != nil {
			return session.Session{}, fmt.Errorf("open workspace: %w", err)
		}
		finished := false
		defer func() {
			if !finished {
				_, _ = done(context.WithoutCancel(ctx), false)
			}
		}()
		meta.Sandbox = sb
		meta.Placement = func(ctx context.Context) (session.Placement, error) {
			finished = true
			return done(ctx, true)
		}
	}
	return a.Step(ctx, in, meta)
}

// oneShot makes the single model call of a selector or compressor: the
// spec's instructions (or def), the transcript, then a final user message.
func oneShot(ctx context.Context, env Env, spec agent.Spec, provider llm.Provider, model, def, final string,
	in session.Session,
) (llm.Response, error) {
	if b := env.Budget; b.MaxTokens > 0 && b.UsedTokens >= b.MaxTokens {
		return llm.Response{}, fmt.Errorf("%w: used %d of %d tokens", ErrBudgetExceeded, b.UsedTokens, b.MaxTokens)
	}
	if b := env.Budget; b.MaxCostUSD > 0 && b.UsedCostUSD >= b.MaxCostUSD {
		return llm.Response{}, fmt.Errorf("%w: used %g of %g USD", ErrBudgetExceeded, b.UsedCostUSD, b.MaxCostUSD)
	}
	chunks, err := in.Chunks(ctx)
	if err != nil {
		return llm.Response{}, err
	}
	sys := spec.Instructions
	if sys == "" {
		sys = def
	}
	msgs := make([]llm.Message, 0, len(chunks)+2)
	if sys != "" {
		msgs = append(msgs, llm.Message{Role: llm.RoleSystem, Content: sys})
	}
	msgs = append(msgs, llm.MessagesFromChunks(chunks)...)
	msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: final})
	p := spec.Params
	req := llm.Request{
		Model: model, Messages: msgs, Temperature: p.Temperature, MaxTokens: p.MaxTokens, Seed: p.Seed,
		Stop: p.Stop, ReasoningEffort: p.ReasoningEffort, ResponseFormat: p.ResponseFormat, Extra: p.Extra,
	}
	resp, err := provider.Chat(ctx, req)
	if err != nil {
		return llm.Response{}, fmt.Errorf("%s: model %s: %w", spec.Name, model, err)
	}
	switch {
	case len(resp.ToolCalls) > 0:
		return resp, fmt.Errorf("%w: %s: the model called tools (%d calls) with tools off", ErrBadReply, spec.Name, len(resp.ToolCalls))
	case resp.FinishReason != llm.FinishStop && resp.FinishReason != llm.FinishLength && resp.FinishReason != llm.FinishContentFilter:
		return resp, fmt.Errorf("%w: %s: finish reason %q", ErrBadReply, spec.Name, resp.FinishReason)
	case strings.TrimSpace(resp.Content) == "":
		return resp, fmt.Errorf("%w: %s: empty reply", ErrBadReply, spec.Name)
	}
	return resp, nil
}

// Decision is the payload of a selector_decision chunk: the candidates
// offered, the model's raw reply and the index chosen (-1 for none).
type Decision struct {
	Selector   string   `json:"selector"`
	Model      string   `json:"model,omitempty"`
	Candidates []string `json:"candidates"`
	Reply      string   `json:"reply"`
	Choice     int      `json:"choice"`
	// Branches are the versions the candidates describe when a rollout's
	// selector chose among its branches ([Call.Branches]).
	Branches []session.ID `json:"branches,omitempty"`
}

// DecisionOf returns the decision a select step recorded: the
// selector_decision chunk the version s appends.
func DecisionOf(s session.Session) (Decision, error) {
	if s.IsZero() {
		return Decision{}, errors.New("flow: decision of a zero session")
	}
	cs := s.Version().Chunks
	for i := len(cs) - 1; i >= 0; i-- {
		if cs[i].Kind() != session.KindSelectorDecision {
			continue
		}
		var d Decision
		if err := json.Unmarshal(cs[i].Payload(), &d); err != nil {
			return Decision{}, fmt.Errorf("flow: decode selector_decision of %s: %w", s.ID(), err)
		}
		return d, nil
	}
	return Decision{}, fmt.Errorf("flow: version %s records no selector decision", s.ID())
}

var firstInt = regexp.MustCompile(`-?\d+`)

// ParseChoice returns the index a selector reply chooses among n
// candidates: its first integer token (-?\d+). No integer, -1 or an index
// outside 0..n-1 is -1 (none).
func ParseChoice(reply string, n int) int {
	tok := firstInt.FindString(reply)
	if tok == "" {
		return -1
	}
	i, err := strconv.Atoi(tok)
	if err != nil || i < 0 || i >= n {
		return -1
	}
	return i
}

// Menu is the final user message of a select call.
func Menu(candidates []string) string {
	var b strings.Builder
	b.WriteString("Candidate workflows:\n")
	for i, d := range candidates {
		fmt.Fprintf(&b, "%d: %s\n", i, d)
	}
	b.WriteString("\nReply with one index, or -1.")
	return b.String()
}

func executeSelect(ctx context.Context, env Env, key string, call Call, provider llm.Provider, model string,
	prod session.Producer, in session.Session,
) (session.Session, error) {
	resp, err := oneShot(ctx, env, call.Agent, provider, model, DefaultSelectInstruction, Menu(call.Candidates), in)
	if err != nil {
		return session.Session{}, err
	}
	prod.Agent, prod.Model = call.Agent.Name, orString(resp.Model, model)
	d := Decision{Selector: call.Agent.Name, Model: prod.Model, Candidates: call.Candidates, Reply: resp.Content,
		Choice: ParseChoice(resp.Content, len(call.Candidates)), Branches: call.Branches}
	c, err := session.Evidence(session.KindSelectorDecision, d)
	if err != nil {
		return session.Session{}, err
	}
	return in.Extend(ctx, session.Extension{
		Op: session.OpStep, Chunks: []session.Chunk{c}, Usage: resp.Usage, Producer: prod, Key: key,
		Extras: []session.Extra{rawExtra("select.choice", d.Choice)},
	})
}

func executeCompress(ctx context.Context, env Env, key string, call Call, provider llm.Provider, model string,
	prod session.Producer, in session.Session,
) (session.Session, error) {
	instr := call.Instruction
	if instr == "" {
		instr = DefaultCompressInstruction
	}
	resp, err := oneShot(ctx, env, call.Agent, provider, model, "", instr, in)
	if err != nil {
		return session.Session{}, err
	}
	prod.Agent, prod.Model = call.Agent.Name, orString(resp.Model, model)
	body, err := json.Marshal(map[string]string{"content": strings.TrimSpace(resp.Content)})
	if err != nil {
		return session.Session{}, err
	}
	summary, err := session.NewChunk(session.KindSummary, body)
	if err != nil {
		return session.Session{}, err
	}
	parent := in.Version()
	v := &session.Version{
		ID:        session.NewID(),
		Parents:   []session.ID{parent.ID},
		Op:        session.OpCompress,
		Chunks:    []session.Chunk{summary},
		Placement: parent.Placement,
		// Usage stays cumulative: the compressed history's plus this call.
		Usage:    parent.Usage.Add(resp.Usage),
		Producer: prod,
		Extras: []session.Extra{
			rawExtra("compression.lossy", true),
			rawExtra("compression.rows_in", parent.Len),
			rawExtra("compression.rows_out", 1),
			rawExtra("compression.usage", resp.Usage),
		},
		Key:       key,
		CreatedAt: time.Now().UTC().Truncate(time.Microsecond),
	}
	if err := session.Seal(v, []*session.Version{parent}, nil); err != nil {
		return session.Session{}, fmt.Errorf("compress: %w", err)
	}
	got, err := in.Graph().Put(ctx, v)
	if err != nil {
		return session.Session{}, fmt.Errorf("compress: commit %s: %w", v.ID, err)
	}
	return session.Wrap(in.Graph(), got), nil
}

func orString(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func rawExtra(key string, v any) session.Extra {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte("null")
	}
	return session.Extra{Key: key, Value: b}
}
