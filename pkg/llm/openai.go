package llm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/rath-run/rath/pkg/session"
)

// Defaults for [OpenAIConfig].
const (
	DefaultOpenAIBaseURL   = "https://api.openai.com/v1"
	DefaultTimeout         = 120 * time.Second
	DefaultMaxAttempts     = 4
	DefaultBaseDelay       = 500 * time.Millisecond
	DefaultMaxDelay        = 20 * time.Second
	DefaultAzureAPIVersion = "2024-10-21"
)

// OpenAIConfig configures an [OpenAI] provider. Zero values take the
// defaults named on each field.
type OpenAIConfig struct {
	// BaseURL is the endpoint's API root, such as https://api.openai.com/v1
	// (the default), http://localhost:11434/v1 for Ollama, or an Azure
	// resource endpoint when Azure is set (required then).
	BaseURL string
	// APIKey is sent as a bearer token (as the api-key header for Azure).
	// Empty sends no credentials, as local servers expect. It never appears
	// in an error.
	APIKey string
	// Model is the default model, used when a Request names none. For Azure
	// it is the deployment name.
	Model string
	// Azure selects Azure OpenAI's deployment URLs and api-key header;
	// APIVersion is its api-version (default 2024-10-21). Azure's v1
	// endpoint (…/openai/v1) is OpenAI-compatible: use it with Azure unset.
	Azure      bool
	APIVersion string
	// Timeout bounds each HTTP call, including reading a streamed reply
	// to its end. Default 120s.
	Timeout time.Duration
	// MaxAttempts is how many HTTP calls one Chat may make. Default 4; 1
	// disables retries.
	MaxAttempts int
	// BaseDelay and MaxDelay shape the backoff between attempts: attempt n
	// waits a uniformly random time in [0, min(MaxDelay, BaseDelay·2^(n-1))]
	// ("full jitter"). Defaults 500ms and 20s.
	BaseDelay, MaxDelay time.Duration
	// HTTPClient makes the calls; default a new http.Client with no
	// client-wide timeout (Timeout applies per call), over a connection
	// pool shared by such clients that keeps up to 1,024 idle connections
	// per host.
	HTTPClient *http.Client
}

// OpenAI is a [Provider] and [Streamer] for every OpenAI-compatible chat
// completions endpoint (OpenAI, Azure OpenAI, vLLM, Ollama, LiteLLM,
// gateways, Anthropic's compatibility endpoint), through
// github.com/sashabaranov/go-openai.
//
// # Retries
//
// A call is retried, up to MaxAttempts HTTP calls, on 429, 5xx, connection
// errors, timeouts and malformed or truncated replies; never on other 4xx.
// After a 429 or 503 with Retry-After (seconds or an HTTP date; also
// OpenAI's retry-after-ms) the provider waits exactly that long instead of
// the backoff; when the server asks for more than MaxDelay it stops and
// returns an [*Error] with RetryAfter set, so the worker can reschedule the
// step rather than hold it. A streamed call is retried only while no text
// delta has been passed on: once onDelta has seen text, a failure is
// returned (as [ErrTransient]) so the caller never sees duplicated text.
//
// # Errors
//
// Every error is an [*Error] matching [ErrTransient] or [ErrPermanent]. The
// API key is redacted from every message, including bodies an endpoint
// echoes back. When the caller's context ends the error is transient and
// wraps the context's error.
//
// # Parameters
//
// Every Request field is passed through. Temperature, max_tokens,
// response_format and Extra are written into the request body directly, so
// an explicit temperature of 0 is sent and Extra may carry fields the client
// library does not know; the endpoint, not this package, judges whether the
// model accepts them. Messages always carry a content field (null for a
// tool-call-only assistant message), which strict endpoints require.
//
// An OpenAI is safe for concurrent use.
type OpenAI struct {
	cfg    OpenAIConfig
	client *openai.Client
}

// NewOpenAI validates cfg, applies its defaults and returns the provider.
// It makes no network call.
func NewOpenAI(cfg OpenAIConfig) (*OpenAI, error) {
	const op = "config"
	if cfg.BaseURL == "" {
		if cfg.Azure {
			return nil, permanentf(op, "BaseURL is required for Azure (the resource endpoint, https://<name>.openai.azure.com)")
		}
		cfg.BaseURL = DefaultOpenAIBaseURL
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		shown := "(unparseable)"
		if err == nil {
			shown = u.Redacted()
		}
		return nil, permanentf(op, "BaseURL %s is not an http(s) URL", shown)
	}
	if strings.ContainsFunc(cfg.APIKey, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return nil, permanentf(op, "APIKey contains a control character")
	}
	switch {
	case cfg.Timeout < 0:
		return nil, permanentf(op, "Timeout %s is negative", cfg.Timeout)
	case cfg.MaxAttempts < 0:
		return nil, permanentf(op, "MaxAttempts %d is negative", cfg.MaxAttempts)
	case cfg.BaseDelay < 0:
		return nil, permanentf(op, "BaseDelay %s is negative", cfg.BaseDelay)
	case cfg.MaxDelay < 0:
		return nil, permanentf(op, "MaxDelay %s is negative", cfg.MaxDelay)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.BaseDelay == 0 {
		cfg.BaseDelay = DefaultBaseDelay
	}
	if cfg.MaxDelay == 0 {
		cfg.MaxDelay = DefaultMaxDelay
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Transport: sharedTransport}
	}
	var oc openai.ClientConfig
	if cfg.Azure {
		if cfg.APIVersion == "" {
			cfg.APIVersion = DefaultAzureAPIVersion
		}
		oc = openai.DefaultAzureConfig(cfg.APIKey, cfg.BaseURL)
		oc.APIVersion = cfg.APIVersion
		// The model name is the deployment name, verbatim.
		oc.AzureModelMapperFunc = func(model string) string { return model }
	} else {
		oc = openai.DefaultConfig(cfg.APIKey)
		oc.BaseURL = cfg.BaseURL
		oc.APIVersion = cfg.APIVersion
	}
	oc.HTTPClient = &bodyPatcher{next: cfg.HTTPClient}
	return &OpenAI{cfg: cfg, client: openai.NewClientWithConfig(oc)}, nil
}

// Model returns the provider's default model.
func (p *OpenAI) Model() string { return p.cfg.Model }

// Chat sends req and returns the model's reply.
func (p *OpenAI) Chat(ctx context.Context, req Request) (Response, error) {
	const op = "chat"
	oreq, patch, err := p.build(op, req)
	if err != nil {
		return Response{}, err
	}
	return p.withRetry(ctx, op, patch, func(actx context.Context) (Response, bool, error) {
		r, err := p.client.CreateChatCompletion(actx, oreq)
		if err != nil {
			return Response{}, false, err
		}
		if len(r.Choices) == 0 {
			return Response{}, false, errNoChoices
		}
		m := r.Choices[0].Message
		calls := make([]session.ToolCall, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			calls[i] = session.ToolCall{ID: c.ID, Type: string(c.Type),
				Function: session.FunctionCall{Name: c.Function.Name, Arguments: c.Function.Arguments}}
		}
		return finish(Response{
			Content:   m.Content,
			ToolCalls: calls,
			Refusal:   m.Refusal,
			Usage:     usage(r.Usage),
			Model:     r.Model,
		}, string(r.Choices[0].FinishReason), oreq.Model), false, nil
	})
}

// ChatStream sends req with streaming on, passes text deltas to onDelta
// and returns the assembled reply; see [Streamer].
func (p *OpenAI) ChatStream(ctx context.Context, req Request, onDelta func(string)) (Response, error) {
	const op = "chat stream"
	oreq, patch, err := p.build(op, req)
	if err != nil {
		return Response{}, err
	}
	oreq.Stream = true
	oreq.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	return p.withRetry(ctx, op, patch, func(actx context.Context) (Response, bool, error) {
		stream, err := p.client.CreateChatCompletionStream(actx, oreq)
		if err != nil {
			return Response{}, false, err
		}
		defer stream.Close()
		var acc streamAccumulator
		for {
			chunk, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return Response{}, acc.emitted, err
			}
			acc.add(chunk, onDelta)
		}
		if acc.finish == "" {
			return Response{}, acc.emitted, errTruncatedStream
		}
		return finish(acc.response(), acc.finish, oreq.Model), acc.emitted, nil
	})
}

var (
	errNoChoices       = errors.New("response has no choices")
	errTruncatedStream = errors.New("stream ended before a finish reason")
)

// build maps req to go-openai's request and the body patch applied on the
// wire (see bodyPatcher).
func (p *OpenAI) build(op string, req Request) (openai.ChatCompletionRequest, map[string]json.RawMessage, error) {
	model := req.Model
	if model == "" {
		model = p.cfg.Model
	}
	if model == "" {
		return openai.ChatCompletionRequest{}, nil, permanentf(op, "no model: set Request.Model or OpenAIConfig.Model")
	}
	oreq := openai.ChatCompletionRequest{
		Model:           model,
		Stop:            req.Stop,
		Seed:            req.Seed,
		ReasoningEffort: req.ReasoningEffort,
	}
	if req.ParallelToolCalls != nil {
		oreq.ParallelToolCalls = *req.ParallelToolCalls
	}
	switch req.ToolChoice {
	case "":
	case "auto", "none", "required":
		oreq.ToolChoice = req.ToolChoice
	default:
		oreq.ToolChoice = openai.ToolChoice{Type: openai.ToolTypeFunction, Function: openai.ToolFunction{Name: req.ToolChoice}}
	}
	for i, t := range req.Tools {
		if t.Name == "" {
			return oreq, nil, permanentf(op, "tools[%d]: name is required", i)
		}
		params := t.Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		} else if !isJSONObject(params) {
			return oreq, nil, permanentf(op, "tools[%d] (%s): parameters must be a JSON object schema", i, t.Name)
		}
		oreq.Tools = append(oreq.Tools, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: t.Name, Description: t.Description, Parameters: params,
		}})
	}
	// Messages go through go-openai too (its validators look at them), but
	// the wire form is ours: see wireMessages.
	for _, m := range req.Messages {
		om := openai.ChatCompletionMessage{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			om.ToolCalls = append(om.ToolCalls, openai.ToolCall{ID: c.ID, Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: c.Function.Name, Arguments: c.Function.Arguments}})
		}
		oreq.Messages = append(oreq.Messages, om)
	}

	patch := map[string]json.RawMessage{}
	msgs, err := wireMessages(req.Messages)
	if err != nil {
		return oreq, nil, permanentf(op, "messages: %v", err)
	}
	patch["messages"] = msgs
	if req.Temperature != nil {
		patch["temperature"], _ = json.Marshal(*req.Temperature)
	}
	if req.MaxTokens < 0 {
		return oreq, nil, permanentf(op, "MaxTokens %d is negative", req.MaxTokens)
	}
	if req.MaxTokens > 0 {
		patch["max_tokens"], _ = json.Marshal(req.MaxTokens)
	}
	if len(req.ResponseFormat) > 0 {
		if !isJSONObject(req.ResponseFormat) {
			return oreq, nil, permanentf(op, "ResponseFormat must be a JSON object")
		}
		patch["response_format"] = req.ResponseFormat
	}
	for k, v := range req.Extra {
		if k == "stream" || k == "stream_options" {
			return oreq, nil, permanentf(op, "Extra[%q]: streaming is chosen by calling Chat or ChatStream", k)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return oreq, nil, permanentf(op, "Extra[%q]: %v", k, err)
		}
		patch[k] = b
	}
	return oreq, patch, nil
}

// wireMessage is a chat message as sent: content always present.
type wireMessage struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content"`
	Name       string         `json:"name,omitempty"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type wireToolCall struct {
	ID       string               `json:"id"`
	Type     string               `json:"type"`
	Function session.FunctionCall `json:"function"`
}

func wireMessages(msgs []Message) (json.RawMessage, error) {
	out := make([]wireMessage, len(msgs))
	for i, m := range msgs {
		if m.Role == "" {
			return nil, fmt.Errorf("messages[%d]: role is required", i)
		}
		w := wireMessage{Role: m.Role, Name: m.Name, ToolCallID: m.ToolCallID}
		if m.Content != "" || len(m.ToolCalls) == 0 {
			content := m.Content
			w.Content = &content
		}
		for _, c := range m.ToolCalls {
			w.ToolCalls = append(w.ToolCalls, wireToolCall{ID: c.ID, Type: "function", Function: c.Function})
		}
		out[i] = w
	}
	return json.Marshal(out)
}

func isJSONObject(b []byte) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(b, &m) == nil && m != nil
}

func usage(u openai.Usage) session.Usage {
	out := session.Usage{
		PromptTokens:     int64(u.PromptTokens),
		CompletionTokens: int64(u.CompletionTokens),
		TotalTokens:      int64(u.TotalTokens),
	}
	if out.TotalTokens == 0 {
		out.TotalTokens = out.PromptTokens + out.CompletionTokens
	}
	return out
}

// finish normalises a reply: tool calls get ids, types and names (so the
// assistant chunk is valid), the finish reason is one of the known ones and
// Model falls back to the requested model.
func finish(r Response, reason, model string) Response {
	if len(r.ToolCalls) == 0 {
		r.ToolCalls = nil
	}
	for i := range r.ToolCalls {
		c := &r.ToolCalls[i]
		if c.Type == "" {
			c.Type = "function"
		}
		if c.Function.Name == "" {
			// The loop answers it as an unknown tool.
			c.Function.Name = "missing_tool_name"
		}
		if c.ID == "" {
			sum := sha256.Sum256([]byte(c.Function.Name + "\x00" + c.Function.Arguments))
			c.ID = fmt.Sprintf("call_%d_%s", i, hex.EncodeToString(sum[:4]))
		}
	}
	switch reason {
	case FinishStop, FinishLength, FinishToolCalls, FinishContentFilter, FinishFunctionCall:
	case "", "null":
		reason = FinishStop
		if len(r.ToolCalls) > 0 {
			reason = FinishToolCalls
		}
	default:
		reason = FinishStop
	}
	r.FinishReason = reason
	if r.Model == "" {
		r.Model = model
	}
	return r
}

// streamAccumulator assembles a streamed reply as OpenRath does: text
// concatenated, tool calls bucketed by index with names and arguments
// concatenated, the last finish reason and the last usage seen.
type streamAccumulator struct {
	content strings.Builder
	refusal strings.Builder
	calls   []session.ToolCall
	byIndex map[int]int
	finish  string
	usage   *openai.Usage
	model   string
	emitted bool
}

func (a *streamAccumulator) add(chunk openai.ChatCompletionStreamResponse, onDelta func(string)) {
	if chunk.Model != "" {
		a.model = chunk.Model
	}
	if chunk.Usage != nil {
		a.usage = chunk.Usage
	}
	if len(chunk.Choices) == 0 {
		return
	}
	ch := chunk.Choices[0]
	if d := ch.Delta.Content; d != "" {
		a.content.WriteString(d)
		if onDelta != nil {
			a.emitted = true
			onDelta(d)
		}
	}
	a.refusal.WriteString(ch.Delta.Refusal)
	for _, tc := range ch.Delta.ToolCalls {
		var pos int
		switch {
		case tc.Index != nil:
			if a.byIndex == nil {
				a.byIndex = map[int]int{}
			}
			p, ok := a.byIndex[*tc.Index]
			if !ok {
				p = len(a.calls)
				a.byIndex[*tc.Index] = p
				a.calls = append(a.calls, session.ToolCall{})
			}
			pos = p
		case len(a.calls) > 0 && (tc.ID == "" || tc.ID == a.calls[len(a.calls)-1].ID):
			pos = len(a.calls) - 1
		default:
			pos = len(a.calls)
			a.calls = append(a.calls, session.ToolCall{})
		}
		c := &a.calls[pos]
		if tc.ID != "" {
			c.ID = tc.ID
		}
		if tc.Type != "" {
			c.Type = string(tc.Type)
		}
		c.Function.Name += tc.Function.Name
		c.Function.Arguments += tc.Function.Arguments
	}
	if ch.FinishReason != "" && ch.FinishReason != openai.FinishReasonNull {
		a.finish = string(ch.FinishReason)
	}
}

func (a *streamAccumulator) response() Response {
	r := Response{Content: a.content.String(), Refusal: a.refusal.String(), ToolCalls: a.calls, Model: a.model}
	if a.usage != nil {
		r.Usage = usage(*a.usage)
	}
	return r
}

// sharedTransport makes the calls of the clients NewOpenAI builds itself:
// http.DefaultTransport keeps 2 idle connections per host, so a worker
// with 250 model calls in flight to one endpoint would close and dial (TLS
// included) ~248 connections each time they end; this one keeps them.
var sharedTransport = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 1024, 1024
	return t
}()
