package llm

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/rath-run/rath/pkg/session"
)

// Chat message roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Finish reasons a [Response] carries. Providers map a reason they do not
// know to [FinishStop], as OpenRath does.
const (
	FinishStop          = "stop"
	FinishLength        = "length"
	FinishToolCalls     = "tool_calls"
	FinishContentFilter = "content_filter"
	FinishFunctionCall  = "function_call"
)

// Message is one chat message sent to a model.
type Message struct {
	// Role is system, user, assistant or tool.
	Role    string `json:"role"`
	Content string `json:"content"`
	// ToolCalls are an assistant message's calls.
	ToolCalls []session.ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID links a tool message to the call it answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Name is an optional participant name; [MessagesFromChunks] never sets
	// it (OpenRath does not send a tool result's name).
	Name string `json:"name,omitempty"`
}

// Tool is a function the model may call: its name, a description for the
// model and the JSON schema of its arguments (an object schema; nil means
// no arguments).
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// Request is one chat completion request. Zero values mean "not set": the
// field is not sent and the endpoint's default applies.
type Request struct {
	// Model overrides the provider's configured model.
	Model    string
	Messages []Message
	Tools    []Tool
	// Temperature is sent when non-nil, including an explicit 0.
	Temperature *float32
	MaxTokens   int
	// ToolChoice is "auto", "none", "required", or the name of one tool the
	// model must call.
	ToolChoice        string
	ParallelToolCalls *bool
	Seed              *int
	ReasoningEffort   string
	// ResponseFormat is sent verbatim and must be a JSON object, such as
	// {"type":"json_object"}.
	ResponseFormat json.RawMessage
	Stop           []string
	// Extra fields are merged last into the request body, overriding
	// anything above (OpenRath's extra_create_args). "stream" and
	// "stream_options" are refused: the provider controls streaming.
	Extra map[string]any
}

// Response is a model's reply.
type Response struct {
	Content   string
	ToolCalls []session.ToolCall
	// Refusal is the model's refusal text, when it refused.
	Refusal string
	Usage   session.Usage
	// Model is the model that answered, as the endpoint reports it.
	Model string
	// FinishReason is one of the Finish constants. When the endpoint sends
	// none it is tool_calls if there are calls, else stop.
	FinishReason string
}

// Chunk returns the response as an assistant chunk ([session.Assistant]):
// its content and tool calls, or its refusal text when the content is empty
// and the model refused, so the transcript records what happened. Providers
// in this package return tool calls that each carry an id and a function
// name, so the chunk is always valid.
func (r Response) Chunk() session.Chunk {
	text := r.Content
	if text == "" && len(r.ToolCalls) == 0 {
		text = r.Refusal
	}
	return session.Assistant(text, r.ToolCalls...)
}

// Provider answers chat requests. Implementations must be safe for
// concurrent use and must not retain or modify the request after Chat
// returns. Errors are classified with [ErrTransient] and [ErrPermanent].
type Provider interface {
	Chat(ctx context.Context, req Request) (Response, error)
}

// Streamer is implemented by providers that can stream. onDelta receives
// text deltas in order as they arrive, from the calling goroutine; their
// concatenation is the final Response's Content, and the Response is the
// same as Chat's would be.
type Streamer interface {
	ChatStream(ctx context.Context, req Request, onDelta func(string)) (Response, error)
}

// Sentinel errors. Every error a provider in this package returns matches
// exactly one of ErrTransient and ErrPermanent with errors.Is.
var (
	// ErrTransient: the call may succeed if retried later (rate limits,
	// 5xx, connection failures, timeouts, truncated or malformed replies).
	// The provider has already retried as configured.
	ErrTransient = errors.New("rath: transient model error")
	// ErrPermanent: retrying the same request will not help (other 4xx,
	// invalid requests or configuration, an exhausted script).
	ErrPermanent = errors.New("rath: permanent model error")
	// ErrScriptExhausted: the scripted model has no reply for the request.
	// It also matches ErrPermanent.
	ErrScriptExhausted = errors.New("rath: scripted model has no more replies")
	// ErrNotConfigured: [Resolve] found no endpoint, key or model. Callers
	// may fall back to the scripted model. It also matches ErrPermanent.
	ErrNotConfigured = errors.New("rath: no model provider configured")
)
