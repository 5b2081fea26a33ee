package bus

import "github.com/nats-io/nats.go"

// HeaderCarrier adapts nats.Header to OpenTelemetry's
// propagation.TextMapCarrier (Get, Set, Keys) without importing otel:
//
//	otel.GetTextMapPropagator().Inject(ctx, bus.HeaderCarrier(hdr))
//	ctx = otel.GetTextMapPropagator().Extract(ctx, bus.HeaderCarrier(d.Header))
//
// NATS header names are case-sensitive; the W3C propagator reads and
// writes the lowercase names traceparent and tracestate, so both sides
// agree. Set on a nil carrier does nothing.
type HeaderCarrier nats.Header

// Get returns the first value of key, or "".
func (c HeaderCarrier) Get(key string) string { return nats.Header(c).Get(key) }

// Set replaces the values of key with value.
func (c HeaderCarrier) Set(key, value string) {
	if c == nil {
		return
	}
	nats.Header(c).Set(key, value)
}

// Keys lists the header names.
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
