package telemetry

import (
	"context"
	"encoding/json"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/tool"
)

// Attribute keys: the OpenTelemetry GenAI semantic conventions, and Rath's
// ids.
const (
	AttrGenAIOperation    = attribute.Key("gen_ai.operation.name")
	AttrGenAIProvider     = attribute.Key("gen_ai.provider.name")
	AttrGenAIRequestModel = attribute.Key("gen_ai.request.model")
	AttrGenAIRespModel    = attribute.Key("gen_ai.response.model")
	AttrGenAIFinish       = attribute.Key("gen_ai.response.finish_reasons")
	AttrGenAIInputTokens  = attribute.Key("gen_ai.usage.input_tokens")
	AttrGenAIOutputTokens = attribute.Key("gen_ai.usage.output_tokens")
	AttrGenAIToolName     = attribute.Key("gen_ai.tool.name")
	AttrGenAIToolCallID   = attribute.Key("gen_ai.tool.call.id")
	AttrGenAIToolType     = attribute.Key("gen_ai.tool.type")
	AttrGenAIAgentName    = attribute.Key("gen_ai.agent.name")
	AttrGenAIConversation = attribute.Key("gen_ai.conversation.id")
	AttrErrorType         = attribute.Key("error.type")

	AttrRunID          = attribute.Key("rath.run.id")
	AttrStepID         = attribute.Key("rath.step.id")
	AttrSessionVersion = attribute.Key("rath.session.version")
	AttrQueue          = attribute.Key("rath.queue")
	AttrDelivery       = attribute.Key("rath.delivery")
	AttrRunKind        = attribute.Key("rath.run.kind")
)

// GenAI operation names.
const (
	OpChat        = "chat"
	OpInvokeAgent = "invoke_agent"
	OpExecuteTool = "execute_tool"
)

// TracedProvider returns p with a "chat {model}" client span around every
// model call (a child of the caller's span) and the call's tokens counted
// in m. providerName is gen_ai.provider.name ("openai", "rath.scripted").
// The result implements llm.Streamer when p does.
func TracedProvider(p llm.Provider, tp trace.TracerProvider, m *Metrics, providerName string) llm.Provider {
	tr := &tracedProvider{p: p, tracer: Tracer(tp), m: m, name: providerName}
	if _, ok := p.(llm.Streamer); ok {
		return &tracedStreamer{tr}
	}
	return tr
}

type tracedProvider struct {
	p      llm.Provider
	tracer trace.Tracer
	m      *Metrics
	name   string
}

func (t *tracedProvider) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	return t.call(ctx, req, func(ctx context.Context) (llm.Response, error) { return t.p.Chat(ctx, req) })
}

func (t *tracedProvider) call(ctx context.Context, req llm.Request, fn func(context.Context) (llm.Response, error)) (llm.Response, error) {
	ctx, span := t.tracer.Start(ctx, OpChat+" "+CapModel(req.Model), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(AttrGenAIOperation.String(OpChat), AttrGenAIProvider.String(t.name), modelAttr(AttrGenAIRequestModel, req.Model)))
	defer span.End()
	start := time.Now()
	resp, err := fn(ctx)
	t.m.modelCall(req.Model, resp.Usage.PromptTokens, resp.Usage.CompletionTokens, time.Since(start), err)
	if err != nil {
		span.SetStatus(codes.Error, Redact(err.Error()))
		span.SetAttributes(AttrErrorType.String("model_error"))
		return resp, err
	}
	span.SetAttributes(
		modelAttr(AttrGenAIRespModel, resp.Model),
		AttrGenAIFinish.StringSlice([]string{resp.FinishReason}),
		AttrGenAIInputTokens.Int64(resp.Usage.PromptTokens),
		AttrGenAIOutputTokens.Int64(resp.Usage.CompletionTokens),
	)
	return resp, nil
}

type tracedStreamer struct{ *tracedProvider }

func (t *tracedStreamer) ChatStream(ctx context.Context, req llm.Request, onDelta func(string)) (llm.Response, error) {
	st, _ := t.p.(llm.Streamer)
	return t.call(ctx, req, func(ctx context.Context) (llm.Response, error) { return st.ChatStream(ctx, req, onDelta) })
}

// TracedTools returns set with every tool wrapped by [TracedTool] (the
// compiled schemas are reused).
func TracedTools(set *tool.Set, tp trace.TracerProvider, m *Metrics) *tool.Set {
	return set.Wrap(func(t tool.Tool) tool.Tool { return TracedTool(t, tp, m) })
}

// TracedTool returns t with an "execute_tool {name}" internal span around
// every call (gen_ai.tool.name, gen_ai.tool.call.id from
// [tool.CallID]) and the call counted in m.
func TracedTool(t tool.Tool, tp trace.TracerProvider, m *Metrics) tool.Tool {
	return &tracedTool{Tool: t, tracer: Tracer(tp), m: m}
}

type tracedTool struct {
	tool.Tool
	tracer trace.Tracer
	m      *Metrics
}

func (t *tracedTool) Call(ctx context.Context, env tool.Env, args json.RawMessage) (any, error) {
	name := t.Def().Name
	ctx, span := t.tracer.Start(ctx, OpExecuteTool+" "+name, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(AttrGenAIOperation.String(OpExecuteTool), AttrGenAIToolName.String(name),
			AttrGenAIToolCallID.String(tool.CallID(ctx)), AttrGenAIToolType.String("function")))
	defer span.End()
	start := time.Now()
	v, err := t.Tool.Call(ctx, env, args)
	t.m.toolCall(name, time.Since(start), err)
	if err != nil {
		span.SetStatus(codes.Error, Redact(err.Error()))
		span.SetAttributes(AttrErrorType.String("tool_error"))
	}
	return v, err //nolint:wrapcheck // a tool's error body is its own
}
