package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/rath-run/rath/internal/telemetry"
)

var errBase = errors.New("base")

func TestLoggerRedactsSecrets(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := telemetry.NewLogger(&buf, telemetry.LogJSON, slog.LevelDebug)
	secrets := []string{"sk-proj-abc123DEF456ghi789", "s3cr3tpass", "eyJhbGciOiJIUzI1NiJ9.payload.sig", "rath_0123456789abcdef"}
	err := fmt.Errorf("model call: 401 for key sk-proj-abc123DEF456ghi789 via postgres://rath:s3cr3tpass@db:5432/rath: %w", errBase)
	log.With(slog.String("db", "postgres://rath:s3cr3tpass@db:5432/rath")).Error("request failed: Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig",
		slog.Any("error", err),
		slog.String("authorization", "Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig"),
		slog.Group("req", slog.String("api_key", "whatever-value"), slog.String("note", "token=rath_0123456789abcdef")),
		slog.String("path", "/v1/runs"),
	)
	out := buf.String()
	for _, s := range append(secrets, "whatever-value") {
		if strings.Contains(out, s) {
			t.Errorf("log line leaks %q:\n%s", s, out)
		}
	}
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	for _, want := range []string{"postgres://rath:[REDACTED]@db:5432/rath", "/v1/runs", "Bearer [REDACTED]", "model call: 401 for key [REDACTED]"} {
		if !strings.Contains(out, want) {
			t.Errorf("log line lacks %q:\n%s", want, out)
		}
	}
	// The redacted error still unwraps to the original.
	if red := telemetry.RedactError(err); !errors.Is(red, errBase) || strings.Contains(red.Error(), "s3cr3tpass") {
		t.Errorf("RedactError = %v", red)
	}
}

func TestLoggerStampsTraceIDs(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := telemetry.NewLogger(&buf, telemetry.LogText, slog.LevelInfo)
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("test").Start(context.Background(), "op")
	log.InfoContext(ctx, "inside")
	span.End()
	log.Info("outside")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines: %q", lines)
	}
	sc := span.SpanContext()
	if !strings.Contains(lines[0], "trace_id="+sc.TraceID().String()) || !strings.Contains(lines[0], "span_id="+sc.SpanID().String()) {
		t.Errorf("record in a span lacks its ids: %s", lines[0])
	}
	if strings.Contains(lines[1], "trace_id") {
		t.Errorf("record outside a span has a trace id: %s", lines[1])
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"key sk-abcdefghijklmnop done":                "key [REDACTED] done",
		"nats://user:pw@host:4222":                    "nats://user:[REDACTED]@host:4222",
		"Authorization: Basic dXNlcjpwYXNz":           "Authorization: Basic [REDACTED]",
		`{"api_key": "abc123"}`:                       `{"api_key": "[REDACTED]"}`,
		"password=hunter2&user=x":                     "password=[REDACTED]&user=x",
		"plain text with no secrets, run_01a2 step 0": "plain text with no secrets, run_01a2 step 0",
	} {
		if got := telemetry.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzRedact(f *testing.F) {
	for _, s := range []string{"sk-abcdefghijklmnop", "postgres://u:p@h/db", "Bearer abc.def", "token=x", "", "ünïcode://a:b@c",
		"BASIC dXNlcjpwYXNz", "API-KEY: abc", "\u212aey=v", "Token = abc", "ghp_abcdefghij", "xoxb_abcdefghij", "AKIAABCDEFGHIJKLMNOP", "rath_abcdefghij",
		"run_01a2/0", "w1", "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		once := telemetry.Redact(s)
		// The filter that skips the patterns never changes the result.
		if all := telemetry.RedactAll(s); once != all {
			t.Errorf("Redact(%q) = %q, but every pattern tried gives %q", s, once, all)
		}
		if strings.Contains(s, "sk-") && len(s) > 200 {
			return
		}
		if twice := telemetry.Redact(once); twice != once {
			t.Errorf("Redact is not idempotent: %q → %q → %q", s, once, twice)
		}
	})
}
