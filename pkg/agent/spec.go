// Package agent provides agents: layers that forward a Session through a
// model and its tools. An agent is described by a [Spec] — data, not code —
// so a step job can carry it to any worker; [Agent.Forward] runs it.
//
// # The loop
//
// One step runs the loop ([Agent.Run]): send the instructions (a system
// message, never stored), the transcript and the tool schemas sorted by
// name; record the reply as one assistant chunk; run its tool calls and
// record one tool_result chunk per call in the model's order; repeat until
// the model answers without tool calls. The step commits exactly one
// version (op step) holding every chunk of every round, keyed by the step
// id, so a redelivered step never commits twice.
//
// Tool calls with distinct resource keys run concurrently; calls on the
// same key run in order. A failing call becomes an error body
// {"ok":false,"error_kind":…,"message":…} (see package tool for the kinds)
// and its siblings still run; panics, timeouts (limits.tool_timeout_seconds)
// and bodies over [MaxToolResultBytes] (cut and marked truncated) are
// handled the same way, so a tool cannot break the step.
//
// # Limits and budgets
//
// limits.max_tool_rounds (default 64) bounds model calls; reaching it with
// the model still asking for tools ends the step with a note chunk and the
// extras loop.truncated and loop.stop. limits.max_tokens and
// limits.max_cost_usd (priced with pricing) bound the step; a run's budget
// ([Budget], from the step job) bounds its steps together. Crossing a budget
// ends the step cleanly: tool calls of the last reply are answered with
// budget_exceeded error bodies (the transcript stays a valid conversation),
// a note records the reason and the version carries the budget.exceeded
// extra. Usage is recorded per round (extra loop.round_usage) and summed
// onto the version.
//
// # Approvals
//
// A tool call needs a human's approval when its tool declares it
// (tool.Def.NeedsApproval), the spec lists the tool under approve ("*" for
// every tool), or the tool belongs to an MCP server marked approve: true.
// When the model makes such a call, the whole round waits: no call of that
// reply runs, not even those that need no approval (the simplest rule that
// keeps a round's calls together). With an [Approver] the loop asks it and
// goes on; without one the step commits what it has — up to the
// assistant chunk with the calls, extras loop.stop "approval" and
// approval.pending — and returns an [*ApprovalError] ([ErrNeedsApproval]).
//
// A decision is an approval chunk ([ApprovalChunk]) appended after that
// assistant chunk. Forwarding a version whose transcript ends in open calls
// finishes their round first: approved calls and calls that need no
// approval run, rejected calls are answered with an error body of kind
// rejected carrying the reason, and the loop continues. Calls still without
// a decision wait again, running nothing. Only decisions after the last
// assistant chunk count, so a model that reuses an old call id gets no
// approval from it, and nothing a model or a tool writes can become an
// approval chunk: the model writes assistant chunks, tools tool_result
// bodies.
//
// # Tool policy
//
// policy ([ToolPolicy]) limits the tools outside the model: max_calls caps
// the calls that run in one step, per tool and for all tools ("*");
// command_deny lists patterns of commands run_shell_command and run_code
// refuse (matching rules in docs/tools.md, "Tool policy"). Both are
// checked where tools dispatch, after the pre-checks and any approval: a
// refused call does not run and is answered with an error body of kind
// policy_denied naming the limit or the pattern.
//
// # Bad model output
//
// Unparseable or schema-violating arguments (invalid_tool_arguments) and
// unknown tools (unknown_tool) are answered as error bodies and the model
// gets another turn. Refusals, content-filter stops and empty replies are
// recorded as a note beside the assistant chunk and end the step. Model
// errors (after the provider's retries) fail the step without recording
// anything: the worker retries transient ones.
package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
)

// ErrInvalidSpec wraps every validation error of a spec.
var ErrInvalidSpec = errors.New("rath: invalid agent spec")

// MaxSpecBytes bounds an encoded spec.
const MaxSpecBytes = 1 << 20

// Spec describes an agent. Specs are YAML or JSON documents:
//
//	name: planner
//	instructions: You plan trips.
//	model: scripted
//	script:
//	  - content: Day 1 - Fushimi Inari.
//	limits:
//	  max_tool_rounds: 8
type Spec struct {
	// Name identifies the agent in lineage and traces: [a-z0-9][a-z0-9_.-]*.
	Name string `json:"name"`
	// Instructions become the system message sent before the transcript.
	// They are not written into the session.
	Instructions string `json:"instructions,omitempty"`
	// Model is a provider model name, or "scripted" for the offline model:
	// at most 128 bytes of [A-Za-z0-9._:/@+-] ([llm.ValidateModel]), never
	// a path ("scripted:<name>" names a file of the worker's
	// RATH_SCRIPT_DIR).
	Model string `json:"model"`
	// Provider names a configured provider ([llm.ValidateProvider]);
	// empty means resolve from the environment and config file.
	Provider string `json:"provider,omitempty"`
	// Script holds the scripted model's replies, in order (model scripted).
	Script []llm.ScriptReply `json:"script,omitempty"`
	// ScriptFile names a YAML or JSON file of replies, read by the submitter.
	ScriptFile string `json:"script_file,omitempty"`
	// Tools names the tools the agent may call.
	Tools []string `json:"tools,omitempty"`
	// MCP names stdio MCP servers whose tools the agent may call, in
	// addition to Tools.
	MCP []MCPServer `json:"mcp,omitempty"`
	// Approve names tools whose calls need a human's approval before they
	// run, in addition to tools that declare it themselves
	// (tool.Def.NeedsApproval); "*" means every tool. See "Approvals".
	Approve []string `json:"approve,omitempty"`
	// Policy limits the tools' calls per step and the commands the shell
	// tools run ([ToolPolicy]).
	Policy ToolPolicy `json:"policy,omitzero"`
	// Memory binds a memory store: a name ("local") or a [MemorySpec]
	// object (store, namespace, top_k, scope, commit).
	Memory MemorySpec `json:"memory,omitzero"`
	Limits Limits     `json:"limits,omitzero"`
	// Pricing prices the model's tokens for cost budgets.
	Pricing Pricing `json:"pricing,omitzero"`
	// Params pass through to the model call.
	Params Params `json:"params,omitzero"`
	// Sandbox places the run's input session before its first step: the
	// agent's tools run there ([Sandbox]). nil leaves the session's
	// placement as it is (unplaced: the operator's default backend).
	Sandbox *Sandbox `json:"sandbox,omitempty"`
}

// Sandbox is where an agent's tools run:
//
//	sandbox:
//	  backend: docker              # local or docker
//	  image: rath-sandbox:busybox  # docker only; default the operator's
//	  network: none                # none (default) or egress; docker only
//	  timeout_seconds: 600         # the sandbox's lifetime (0: the backend's)
//
// The coordinator commits a version with op place when the input session is
// not already there, after checking it against the operator's sandbox
// policy; switching an agent between local and docker is this block's
// backend line.
type Sandbox struct {
	Backend        string  `json:"backend"`
	Image          string  `json:"image,omitempty"`
	Network        string  `json:"network,omitempty"`
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty"`
}

// Placement is the session placement the block asks for.
func (b Sandbox) Placement() session.Placement {
	return session.Placement{Backend: b.Backend, Spec: session.Spec{Image: b.Image, Network: b.Network, TimeoutSeconds: b.TimeoutSeconds}}
}

// validate names the first bad field under sandbox.
func (b Sandbox) validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: sandbox.%s: %s", ErrInvalidSpec, field, fmt.Sprintf(format, args...))
	}
	switch {
	case b.Backend == "":
		return bad("backend", "required (local or docker)")
	case b.Backend != "local" && b.Backend != "docker":
		return bad("backend", "%q is not a sandbox backend (local or docker)", b.Backend)
	case b.Network != "" && b.Network != "none" && b.Network != "egress":
		return bad("network", "%q is not none or egress", b.Network)
	case b.Backend == "local" && b.Image != "":
		return bad("image", "the local backend takes no image")
	case b.Backend == "local" && b.Network != "":
		return bad("network", "the local backend takes no network")
	case !(b.TimeoutSeconds >= 0) || b.TimeoutSeconds > 86400*7:
		return bad("timeout_seconds", "must be in 0..604800, got %g", b.TimeoutSeconds)
	}
	return nil
}

// Pricing is what the model's tokens cost, in US dollars per million.
type Pricing struct {
	InputPerMTok  float64 `json:"input_per_mtok,omitempty"`
	OutputPerMTok float64 `json:"output_per_mtok,omitempty"`
}

// Cost prices u in USD.
func (p Pricing) Cost(u session.Usage) float64 { return p.cost(u) }

// cost prices u.
func (p Pricing) cost(u session.Usage) float64 {
	return (float64(u.PromptTokens)*p.InputPerMTok + float64(u.CompletionTokens)*p.OutputPerMTok) / 1e6
}

// MCPServer is a stdio MCP server an agent uses:
//
//	mcp:
//	  - name: files
//	    command: ./mcp-files
//	    args: [--root, /data]
//	    env: {LOG_LEVEL: debug}
//	    tools: [read, search]   # optional allowlist of the server's tools
//
// Its tools reach the model as "<name>__<tool>". The server runs on the
// worker host with only PATH, HOME and Env in its environment; workers run
// only commands their operator allows (see package tool/mcp).
type MCPServer struct {
	// Name identifies the server and prefixes its tools' names:
	// [a-z0-9][a-z0-9-]*, at most 24 bytes, unique within the spec.
	Name string `json:"name"`
	// Command is the executable: a path, or a name looked up in PATH.
	Command string   `json:"command"`
	Args    []string `json:"args,omitempty"`
	// Env is added to the server's scrubbed environment.
	Env map[string]string `json:"env,omitempty"`
	// Tools, when set, limits the exposed tools to these server tool names.
	Tools []string `json:"tools,omitempty"`
	// TimeoutSeconds bounds one tool call; 0 means the worker's default.
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty"`
	// Approve makes every call to this server's tools wait for a human's
	// approval (see "Approvals").
	Approve bool `json:"approve,omitempty"`
	// Idempotent names this server's tools (server tool names, "*" for
	// all) that may run again after a crash left a call's outcome unknown
	// (see [Journal]); the others are not, so such a call stops the step
	// for a review. Declare only tools whose second call has no second
	// effect.
	Idempotent []string `json:"idempotent,omitempty"`
}

// Limits on MCP servers in a spec.
const (
	MaxMCPServers     = 16
	maxMCPNameBytes   = 24
	maxMCPArgs        = 256
	maxMCPStringBytes = 4096
)

var (
	mcpNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	envKeyRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// Validate checks the entry as [Spec.Validate] does; errors name the field
// from "mcp".
func (m *MCPServer) Validate() error { return m.validate("mcp") }

// validate checks one server entry; field is its path, such as "mcp[0]".
func (m *MCPServer) validate(field string) error {
	bad := func(sub, format string, args ...any) error {
		return fmt.Errorf("%w: %s%s: %s", ErrInvalidSpec, field, sub, fmt.Sprintf(format, args...))
	}
	switch {
	case m.Name == "":
		return bad(".name", "required")
	case len(m.Name) > maxMCPNameBytes || !mcpNameRE.MatchString(m.Name):
		return bad(".name", "%q must match %s and be at most %d bytes", m.Name, mcpNameRE, maxMCPNameBytes)
	case strings.TrimSpace(m.Command) == "":
		return bad(".command", "required")
	case len(m.Command) > maxMCPStringBytes || strings.ContainsRune(m.Command, 0):
		return bad(".command", "must be at most %d bytes with no NUL", maxMCPStringBytes)
	case len(m.Args) > maxMCPArgs:
		return bad(".args", "%d arguments, limit %d", len(m.Args), maxMCPArgs)
	case m.TimeoutSeconds < 0:
		return bad(".timeout_seconds", "must be ≥ 0, got %g", m.TimeoutSeconds)
	}
	for i, a := range m.Args {
		if len(a) > maxMCPStringBytes || strings.ContainsRune(a, 0) {
			return bad(fmt.Sprintf(".args[%d]", i), "must be at most %d bytes with no NUL", maxMCPStringBytes)
		}
	}
	for k, v := range m.Env {
		if !envKeyRE.MatchString(k) {
			return bad(".env", "key %q must match %s", k, envKeyRE)
		}
		if len(v) > maxMCPStringBytes || strings.ContainsRune(v, 0) {
			return bad(".env."+k, "must be at most %d bytes with no NUL", maxMCPStringBytes)
		}
	}
	for i, t := range m.Tools {
		if strings.TrimSpace(t) == "" {
			return bad(fmt.Sprintf(".tools[%d]", i), "empty tool name")
		}
	}
	for i, t := range m.Idempotent {
		if strings.TrimSpace(t) == "" || len(t) > maxMCPStringBytes {
			return bad(fmt.Sprintf(".idempotent[%d]", i), "want a tool name of 1 to %d bytes", maxMCPStringBytes)
		}
	}
	return nil
}

// Limits bound one step of the agent.
type Limits struct {
	// MaxToolRounds bounds model calls in one step; default 64.
	MaxToolRounds int `json:"max_tool_rounds,omitempty"`
	// TimeoutSeconds bounds one step; 0 means the worker's default.
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty"`
	// MaxTokens bounds the step's total tokens; 0 means no limit. Crossing
	// it ends the step cleanly, recording why.
	MaxTokens int64 `json:"max_tokens,omitempty"`
	// MaxCostUSD bounds the step's cost under Pricing; 0 means no limit.
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
	// ToolTimeoutSeconds bounds one tool call; default 120.
	ToolTimeoutSeconds float64 `json:"tool_timeout_seconds,omitempty"`
}

// toolTimeout returns the tool timeout with its default applied.
func (l Limits) toolTimeout() time.Duration {
	if l.ToolTimeoutSeconds <= 0 {
		return DefaultToolTimeout
	}
	return time.Duration(l.ToolTimeoutSeconds * float64(time.Second))
}

// Params are model request parameters passed through to the provider.
type Params struct {
	Temperature     *float32        `json:"temperature,omitempty"`
	MaxTokens       int             `json:"max_tokens,omitempty"`
	Seed            *int            `json:"seed,omitempty"`
	Stop            []string        `json:"stop,omitempty"`
	ToolChoice      string          `json:"tool_choice,omitempty"`
	ReasoningEffort string          `json:"reasoning_effort,omitempty"`
	ResponseFormat  json.RawMessage `json:"response_format,omitempty"`
	// ParallelToolCalls is sent when set and the agent has tools.
	ParallelToolCalls *bool `json:"parallel_tool_calls,omitempty"`
	// Extra fields are merged into the request body last (OpenRath's
	// extra_create_args); "stream" and "stream_options" are refused.
	Extra map[string]any `json:"extra,omitempty"`
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// ParseSpec decodes a YAML or JSON spec strictly (unknown and duplicate
// fields are errors) and validates it. Errors name the field.
func ParseSpec(b []byte) (Spec, error) {
	if len(b) > MaxSpecBytes {
		return Spec{}, fmt.Errorf("%w: %d bytes, limit %d", ErrInvalidSpec, len(b), MaxSpecBytes)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return Spec{}, fmt.Errorf("%w: empty document", ErrInvalidSpec)
	}
	var s Spec
	if err := yaml.UnmarshalStrict(b, &s); err != nil {
		return Spec{}, fmt.Errorf("%w: %s", ErrInvalidSpec, cleanYAMLError(err))
	}
	if err := s.Validate(); err != nil {
		return Spec{}, err
	}
	return s, nil
}

func cleanYAMLError(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "error unmarshaling JSON: while decoding JSON: ")
	return strings.TrimPrefix(msg, "error converting YAML to JSON: ")
}

// Validate checks the spec, naming the first bad field.
func (s *Spec) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidSpec, field, fmt.Sprintf(format, args...))
	}
	switch {
	case s.Name == "":
		return bad("name", "required")
	case !nameRE.MatchString(s.Name):
		return bad("name", "%q must match %s", s.Name, nameRE)
	case s.Model == "":
		return bad("model", "required (a provider model name, or scripted)")
	case s.validateNames() != nil:
		return s.validateNames()
	case s.Model != "scripted" && (len(s.Script) > 0 || s.ScriptFile != ""):
		return bad("script", "only the scripted model takes a script (model is %q)", s.Model)
	case s.Model == "scripted" && len(s.Script) == 0 && s.ScriptFile == "":
		return bad("script", "the scripted model needs replies (script or script_file)")
	case s.Limits.MaxToolRounds < 0:
		return bad("limits.max_tool_rounds", "must be ≥ 0, got %d", s.Limits.MaxToolRounds)
	case s.Limits.TimeoutSeconds < 0:
		return bad("limits.timeout_seconds", "must be ≥ 0, got %g", s.Limits.TimeoutSeconds)
	case s.Limits.MaxTokens < 0:
		return bad("limits.max_tokens", "must be ≥ 0, got %d", s.Limits.MaxTokens)
	case !(s.Limits.MaxCostUSD >= 0) || math.IsInf(s.Limits.MaxCostUSD, 0):
		return bad("limits.max_cost_usd", "must be a finite number ≥ 0, got %g", s.Limits.MaxCostUSD)
	case !(s.Limits.ToolTimeoutSeconds >= 0) || s.Limits.ToolTimeoutSeconds > 86400:
		return bad("limits.tool_timeout_seconds", "must be in 0..86400, got %g", s.Limits.ToolTimeoutSeconds)
	case !(s.Pricing.InputPerMTok >= 0) || math.IsInf(s.Pricing.InputPerMTok, 0):
		return bad("pricing.input_per_mtok", "must be a finite number ≥ 0, got %g", s.Pricing.InputPerMTok)
	case !(s.Pricing.OutputPerMTok >= 0) || math.IsInf(s.Pricing.OutputPerMTok, 0):
		return bad("pricing.output_per_mtok", "must be a finite number ≥ 0, got %g", s.Pricing.OutputPerMTok)
	case s.Limits.MaxCostUSD > 0 && s.Pricing == (Pricing{}):
		return bad("limits.max_cost_usd", "a cost budget needs pricing (pricing.input_per_mtok, pricing.output_per_mtok)")
	}
	if s.Sandbox != nil {
		if err := s.Sandbox.validate(); err != nil {
			return err
		}
	}
	for i, r := range s.Script {
		if r.Content == "" && len(r.ToolCalls) == 0 {
			return bad(fmt.Sprintf("script[%d]", i), "a reply needs content or tool_calls")
		}
		if r.DelayMS < 0 {
			return bad(fmt.Sprintf("script[%d].delay_ms", i), "must be ≥ 0")
		}
		if r.DelayJitterMS < 0 || r.DelayJitterMS > r.DelayMS {
			return bad(fmt.Sprintf("script[%d].delay_jitter_ms", i), "must be between 0 and delay_ms (%d), got %d", r.DelayMS, r.DelayJitterMS)
		}
	}
	for _, k := range []string{"stream", "stream_options"} {
		if _, ok := s.Params.Extra[k]; ok {
			return bad("params.extra."+k, "the worker chooses streaming")
		}
	}
	for i, t := range s.Tools {
		if strings.TrimSpace(t) == "" {
			return bad(fmt.Sprintf("tools[%d]", i), "empty tool name")
		}
	}
	for i, t := range s.Approve {
		if strings.TrimSpace(t) == "" {
			return bad(fmt.Sprintf("approve[%d]", i), "empty tool name")
		}
	}
	if err := s.Policy.validate(s); err != nil {
		return err
	}
	if err := s.Memory.validate(); err != nil {
		return err
	}
	if len(s.MCP) > MaxMCPServers {
		return bad("mcp", "%d servers, limit %d", len(s.MCP), MaxMCPServers)
	}
	seen := make(map[string]int, len(s.MCP))
	for i := range s.MCP {
		field := fmt.Sprintf("mcp[%d]", i)
		if err := s.MCP[i].validate(field); err != nil {
			return err
		}
		if j, dup := seen[s.MCP[i].Name]; dup {
			return bad(field+".name", "%q is already the name of mcp[%d]", s.MCP[i].Name, j)
		}
		seen[s.MCP[i].Name] = i
	}
	return nil
}

// MaxToolRounds returns the limit with its default applied.
func (l Limits) maxToolRounds() int {
	if l.MaxToolRounds == 0 {
		return 64
	}
	return l.MaxToolRounds
}
