// Package telemetry is Rath's observability plumbing: OpenTelemetry
// tracing (an OTLP exporter configured by the standard OTEL_* variables, or
// a no-op provider when none is set), W3C trace context carried in NATS
// headers, spans for model and tool calls after the OpenTelemetry GenAI
// semantic conventions, Prometheus metrics on a registry the process owns,
// and a slog handler that stamps trace ids on records and redacts secrets.
//
// # Contracts
//
//   - Nothing here reads the environment directly or sets globals: callers
//     pass Getenv, and the trace.TracerProvider and *Metrics travel through
//     configs. Only cmd/* mains may install otel's global provider and
//     propagator.
//   - A nil *Metrics is valid everywhere and records nothing; a nil
//     trace.TracerProvider means the no-op provider.
//   - With no OTLP endpoint configured, [NewTracerProvider] returns otel's
//     no-op provider: starting a span costs a few nanoseconds and records
//     nothing (docs/BENCHMARKS.md).
//
// docs/observability.md lists the spans, attributes, metric series and
// environment variables.
package telemetry
