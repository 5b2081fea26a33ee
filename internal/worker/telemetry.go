package worker

import (
	"context"
	"encoding/json"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/telemetry"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/tool"
)

// stepObs is one delivery's span and timer.
type stepObs struct {
	span  trace.Span
	m     *telemetry.Metrics
	queue string
	start time.Time
}

// observe starts the delivery's consumer span, a child of the trace
// context the job's headers carry, and counts a redelivery.
func (w *Worker) observe(ctx context.Context, d *bus.Delivery) (context.Context, *stepObs) {
	ctx = telemetry.ExtractNATS(ctx, d.Header)
	ctx, span := telemetry.Tracer(w.cfg.TracerProvider).Start(ctx, "process "+bus.JobSubject(w.cfg.Queue),
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			telemetry.AttrRunID.String(d.Job.RunID), telemetry.AttrStepID.String(d.Job.StepID),
			telemetry.AttrQueue.String(w.cfg.Queue), telemetry.AttrDelivery.Int64(int64(d.NumDelivered())), //nolint:gosec // a delivery count
		))
	if n := d.NumDelivered(); n > 1 && w.cfg.Metrics != nil {
		w.cfg.Metrics.StepsRedelivered.WithLabelValues(w.cfg.Queue).Inc()
	}
	return ctx, &stepObs{span: span, m: w.cfg.Metrics, queue: w.cfg.Queue, start: time.Now()}
}

// started counts a step whose agent is about to run.
func (o *stepObs) started() {
	if o.m != nil {
		o.m.StepsStarted.WithLabelValues(o.queue).Inc()
	}
}

// end records the outcome (committed, retry, failed, acked, handed_back, aborted)
// and ends the span.
func (o *stepObs) end(outcome string, err error) {
	switch outcome {
	case "committed", "retry", "failed":
		o.m.StepEnded(o.queue, outcome, time.Since(o.start))
	}
	if err != nil {
		o.span.SetStatus(codes.Error, telemetry.Redact(err.Error()))
	}
	o.span.End()
}

// instrumented reports whether steps get traced tools and providers.
func (w *Worker) instrumented() bool {
	return w.cfg.TracerProvider != nil || w.cfg.Metrics != nil
}

// traceProvider wraps a step's provider in "chat" spans.
func (w *Worker) traceProvider(p llm.Provider, model string) llm.Provider {
	if !w.instrumented() {
		return p
	}
	name := "openai"
	if model == "scripted" {
		name = "rath.scripted"
	}
	return telemetry.TracedProvider(p, w.cfg.TracerProvider, w.cfg.Metrics, name)
}

// traceTools wraps a step's tools in "execute_tool" spans. The error
// result is always nil (kept so the call site reads as the other steps).
func (w *Worker) traceTools(tools *tool.Set) (*tool.Set, error) { //nolint:unparam // see above
	if !w.instrumented() {
		return tools, nil
	}
	return telemetry.TracedTools(tools, w.cfg.TracerProvider, w.cfg.Metrics), nil
}

// invokeAgent starts the step's "invoke_agent {name}" span and stamps its
// trace id on the version the step commits.
func (w *Worker) invokeAgent(ctx context.Context, job bus.Job, spec agent.Spec, model string, meta *agent.Meta) (context.Context, trace.Span) {
	ctx, span := w.invokeSpan(ctx, job, spec.Name, model)
	meta.Producer.TraceID = telemetry.TraceID(ctx)
	if meta.Sandbox != nil {
		meta.Sandbox = telemetry.InstrumentSandbox(meta.Sandbox, w.cfg.Metrics)
	}
	return ctx, span
}

// invokeSpan starts an "invoke_agent {name}" span: an agent's step, or a
// selector's or compressor's model call (name is then "select" or
// "compress" when the call names no agent).
func (w *Worker) invokeSpan(ctx context.Context, job bus.Job, name, model string) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{
		telemetry.AttrGenAIOperation.String(telemetry.OpInvokeAgent), telemetry.AttrGenAIAgentName.String(name),
		telemetry.AttrGenAIRequestModel.String(telemetry.CapModel(model)),
		telemetry.AttrRunID.String(job.RunID), telemetry.AttrStepID.String(job.StepID),
		telemetry.AttrSessionVersion.String(job.Input),
	}
	if job.Conversation != "" {
		attrs = append(attrs, telemetry.AttrGenAIConversation.String(job.Conversation))
	}
	return telemetry.Tracer(w.cfg.TracerProvider).Start(ctx, telemetry.OpInvokeAgent+" "+name,
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

// span starts an internal span of the step (workspace restore and
// snapshot, the store commit) and returns its end, which records err.
func (w *Worker) span(ctx context.Context, name string, job bus.Job) (context.Context, func(error)) {
	ctx, span := telemetry.Tracer(w.cfg.TracerProvider).Start(ctx, name,
		trace.WithAttributes(telemetry.AttrRunID.String(job.RunID), telemetry.AttrStepID.String(job.StepID)))
	return ctx, func(err error) {
		if err != nil {
			span.SetStatus(codes.Error, telemetry.Redact(err.Error()))
		}
		span.End()
	}
}

// agentDone ends the invoke_agent span with the committed version and
// counts its cost.
func (w *Worker) agentDone(span trace.Span, out session.Session, err error) {
	defer span.End()
	if err != nil {
		span.SetStatus(codes.Error, telemetry.Redact(err.Error()))
		return
	}
	v := out.Version()
	span.SetAttributes(telemetry.AttrSessionVersion.String(v.ID.String()))
	for _, e := range v.Extras {
		if e.Key == "loop.cost_usd" {
			var usd float64
			if json.Unmarshal(e.Value, &usd) == nil {
				w.cfg.Metrics.StepCost(v.Producer.Model, usd)
			}
		}
	}
}
