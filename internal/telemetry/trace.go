package telemetry

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// InstrumentationName names Rath's tracers and meters.
const InstrumentationName = "github.com/rath-run/rath"

// TraceConfig configures [NewTracerProvider].
type TraceConfig struct {
	// ServiceName is the default service.name (rath-coordinator,
	// rath-worker, rathctl, rath-dev); OTEL_SERVICE_NAME overrides it.
	ServiceName string
	// Getenv reads OTEL_* variables; nil reads none (tracing off).
	Getenv func(string) string
	// Exporter, when set, replaces the OTLP exporter (tests, benchmarks);
	// spans are then recorded whatever the environment says.
	Exporter sdktrace.SpanExporter
	// Sync exports each span as it ends instead of in batches (tests).
	Sync bool
}

// Enabled reports whether the environment asks for trace export: an OTLP
// endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), OTEL_SDK_DISABLED is not "true" and
// OTEL_TRACES_EXPORTER is not "none".
func Enabled(getenv func(string) string) bool {
	if getenv == nil {
		return false
	}
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(getenv("OTEL_TRACES_EXPORTER"), "none") {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// NewTracerProvider returns the process's tracer provider and its shutdown
// function (which flushes spans still buffered). Without an exporter and
// with tracing not [Enabled], it is otel's no-op provider and shutdown does
// nothing. Otherwise spans go over OTLP (HTTP/protobuf, or gRPC when
// OTEL_EXPORTER_OTLP_PROTOCOL=grpc), configured by the standard
// OTEL_EXPORTER_OTLP_* variables (endpoint, headers, timeout, compression;
// the exporter reads them itself), with the resource from
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
func NewTracerProvider(ctx context.Context, cfg TraceConfig) (trace.TracerProvider, func(context.Context) error, error) {
	exp := cfg.Exporter
	if exp == nil {
		if !Enabled(cfg.Getenv) {
			return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
		}
		var err error
		if exp, err = newExporter(ctx, cfg.Getenv); err != nil {
			return nil, nil, fmt.Errorf("telemetry: OTLP trace exporter: %w", err)
		}
	}
	name := cmp.Or(cfg.ServiceName, "rath")
	if cfg.Getenv != nil {
		name = cmp.Or(cfg.Getenv("OTEL_SERVICE_NAME"), name)
	}
	res, err := resource.Merge(resource.Default(), resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(name)))
	if err != nil {
		return nil, nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	opt := sdktrace.WithBatcher(exp)
	if cfg.Sync {
		opt = sdktrace.WithSyncer(exp)
	}
	tp := sdktrace.NewTracerProvider(opt, sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}

// Tracer returns Rath's tracer from tp; nil tp means the no-op provider.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer(InstrumentationName)
}

// Propagator is the W3C trace context and baggage propagator Rath uses on
// every hop (HTTP and NATS).
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// InjectNATS writes ctx's trace context into hdr (traceparent, tracestate).
// It does nothing when ctx carries no valid span or hdr is nil.
func InjectNATS(ctx context.Context, hdr nats.Header) {
	if hdr == nil {
		return
	}
	Propagator().Inject(ctx, natsCarrier(hdr))
}

// ExtractNATS returns ctx with the remote span context found in hdr, if any.
func ExtractNATS(ctx context.Context, hdr nats.Header) context.Context {
	if hdr == nil {
		return ctx
	}
	return Propagator().Extract(ctx, natsCarrier(hdr))
}

// natsCarrier adapts nats.Header to propagation.TextMapCarrier (the same
// as bus.HeaderCarrier, kept here so this package does not import bus).
type natsCarrier nats.Header

func (c natsCarrier) Get(key string) string { return nats.Header(c).Get(key) }
func (c natsCarrier) Set(key, value string) { nats.Header(c).Set(key, value) }
func (c natsCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// TraceID returns the id of ctx's span when it is sampled (recorded
// somewhere), else "".
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	return sc.TraceID().String()
}

// newExporter returns the OTLP exporter the environment asks for:
// OTLP/HTTP with protobuf by default, gRPC when OTEL_EXPORTER_OTLP_PROTOCOL
// (or OTEL_EXPORTER_OTLP_TRACES_PROTOCOL) is "grpc". The exporters read
// the other OTEL_EXPORTER_OTLP_* variables from the OS environment
// themselves; the endpoint is taken from getenv, so the caller's
// environment decides.
func newExporter(ctx context.Context, getenv func(string) string) (sdktrace.SpanExporter, error) {
	protocol := cmp.Or(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), "http/protobuf")
	traces, base := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	switch protocol {
	case "grpc":
		var opts []otlptracegrpc.Option
		if u := cmp.Or(traces, base); u != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(u))
		}
		return otlptracegrpc.New(ctx, opts...) //nolint:wrapcheck // the caller wraps
	case "http/protobuf":
		var opts []otlptracehttp.Option
		if traces != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(traces))
		} else if base != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(strings.TrimRight(base, "/")+"/v1/traces"))
		}
		return otlptracehttp.New(ctx, opts...) //nolint:wrapcheck // the caller wraps
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: want grpc or http/protobuf", protocol)
	}
}
