// Package tool provides the tools an agent's model may call.
//
// A [Tool] is a JSON schema the model sees plus Go behavior. The agent loop
// validates arguments against the schema before calling, groups calls by
// [Tool.ResourceKey] (same key in order, distinct keys concurrently), and
// turns every failure into a tool_result error body, so a failing tool never
// stops its siblings or corrupts the session.
//
// Tools reach the outside world only through the [Env] they are given: the
// step's sandbox, never the worker host.
package tool

import (
	"context"
	"encoding/json"

	"github.com/rath-run/rath/pkg/sandbox"
)

// Def is what the model sees of a tool.
type Def struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Parameters is a JSON Schema object.
	Parameters json.RawMessage `json:"parameters"`
	// NeedsApproval says a human must approve every call before it runs:
	// the agent loop stops before executing the call and the step waits
	// for a decision (see package agent, "Approvals"). It is policy, not
	// part of what the model sees. An agent spec can require approval of
	// further tools by name (approve:).
	NeedsApproval bool `json:"needs_approval,omitempty"`
	// ReadOnly says a call changes nothing, in the workspace or outside:
	// running it again is always safe (the read-only built-ins).
	ReadOnly bool `json:"read_only,omitempty"`
	// Idempotent says a call may run again with the same arguments without
	// a second effect, once the step's workspace is restored to its last
	// recorded round (the file and command built-ins, whose sandbox has no
	// network). A step resumed after a crash runs a started call that has
	// no recorded result again only when its tool is idempotent; otherwise
	// the call is ambiguous and the step waits for a review. Default false:
	// MCP and custom tools say so in their definition.
	Idempotent bool `json:"idempotent,omitempty"`
	// Network says a call can reach a network when its sandbox has one
	// (it runs commands: run_shell_command, run_code). Such a tool is
	// idempotent only in a sandbox without network: in a sandbox with
	// network (a placement asking for egress, or the local backend, whose
	// commands run on the host) its calls are treated as not idempotent,
	// whatever Idempotent says.
	Network bool `json:"network,omitempty"`
}

// Env is what a tool call may use.
type Env struct {
	// Sandbox is the step's sandbox; nil when the session is unplaced and
	// the agent has no sandbox.
	Sandbox sandbox.Sandbox
}

// Tool is one callable tool.
type Tool interface {
	Def() Def
	// ResourceKey names what a call touches; calls with equal keys run in
	// order, distinct keys run concurrently. args are already validated.
	ResourceKey(args json.RawMessage) string
	// Call runs the tool. The result is marshaled to JSON as the
	// tool_result content. An error becomes an error body of kind
	// tool_execution_exception unless it wraps an [*Error] with its own kind.
	Call(ctx context.Context, env Env, args json.RawMessage) (any, error)
}

// Error is a tool failure with an OpenRath error kind.
type Error struct {
	Kind    string `json:"error_kind"`
	Message string `json:"message"`
	Detail  any    `json:"detail,omitempty"`
}

func (e *Error) Error() string { return e.Kind + ": " + e.Message }

// Error kinds, as OpenRath names them.
const (
	KindInvalidArguments = "invalid_tool_arguments"
	KindUnknownTool      = "unknown_tool"
	KindExecution        = "tool_execution_exception"
	KindTimeout          = "timeout"
	KindFileNotFound     = "file_not_found"
	KindOSError          = "os_error"
	KindUnsupported      = "unsupported_tool"
	KindSandboxClosed    = "sandbox_closed"
	KindOutsideWorkspace = "path_outside_workspace"
	KindOutputTruncated  = "output_truncated"
	KindNoSandbox        = "no_sandbox"
	// KindRejected answers a call a human rejected (see Def.NeedsApproval);
	// the message carries their reason.
	KindRejected = "rejected"
)
