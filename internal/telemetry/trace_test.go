package telemetry_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace/noop"

	"github.com/rath-run/rath/internal/telemetry"
)

func TestNewTracerProvider(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	for name, c := range map[string]struct {
		getenv  func(string) string
		noop    bool
		wantErr string
	}{
		"unset":           {getenv: env(), noop: true},
		"nil getenv":      {getenv: nil, noop: true},
		"disabled":        {getenv: env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318", "OTEL_SDK_DISABLED", "true"), noop: true},
		"exporter none":   {getenv: env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER", "none"), noop: true},
		"http":            {getenv: env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")},
		"traces endpoint": {getenv: env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces")},
		"grpc":            {getenv: env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")},
		"bad protocol":    {getenv: env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon"), wantErr: "carrier-pigeon"},
	} {
		tp, shutdown, err := telemetry.NewTracerProvider(ctx, telemetry.TraceConfig{ServiceName: "test", Getenv: c.getenv})
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: err = %v, want one naming %q", name, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		_, isNoop := tp.(noop.TracerProvider)
		if isNoop != c.noop {
			t.Errorf("%s: no-op provider %v, want %v", name, isNoop, c.noop)
		}
		if err := shutdown(ctx); err != nil {
			t.Errorf("%s: shutdown: %v", name, err)
		}
	}
}
