package telemetry

import (
	"context"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"
)

// LogFormat is the encoding of [NewLogger]'s records.
type LogFormat string

// Log formats: JSON for the coordinator and worker in production, text for
// `rathctl dev` on a terminal.
const (
	LogJSON LogFormat = "json"
	LogText LogFormat = "text"
)

// NewLogger returns a logger writing format to w at level, through
// [NewHandler]: trace and span ids on every record logged with a context
// that holds a span, and secrets redacted.
func NewLogger(w io.Writer, format LogFormat, level slog.Leveler) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	if format == LogText {
		h = slog.NewTextHandler(w, opts)
	} else {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(NewHandler(h))
}

// NewHandler wraps next: a record logged with a context holding a valid
// span gains trace_id and span_id attributes, and every string attribute,
// error and the message pass through [Redact] (groups and attributes
// added by With included).
func NewHandler(next slog.Handler) slog.Handler { return &handler{next: next} }

type handler struct{ next slog.Handler }

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, Redact(r.Message), r.PC)
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		out.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(a))
		return true
	})
	return h.next.Handle(ctx, out) //nolint:wrapcheck // a handler passes its inner handler's error through
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = redactAttr(a)
	}
	return &handler{next: h.next.WithAttrs(red)}
}

func (h *handler) WithGroup(name string) slog.Handler { return &handler{next: h.next.WithGroup(name)} }

// secretKeys are attribute names whose values are always hidden.
var secretKeys = []string{"authorization", "api_key", "apikey", "token", "password", "secret", "cookie"}

func redactAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	k := strings.ToLower(a.Key)
	for _, s := range secretKeys {
		if strings.Contains(k, s) && v.Kind() != slog.KindGroup {
			if v.Kind() == slog.KindString && v.String() == "" {
				return a
			}
			return slog.String(a.Key, redacted)
		}
	}
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, Redact(v.String()))
	case slog.KindGroup:
		g := v.Group()
		out := make([]any, len(g))
		for i, ga := range g {
			out[i] = redactAttr(ga)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.Any(a.Key, redactedError{msg: Redact(err.Error()), err: err})
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// redactedError is an error whose text is redacted; errors.Is and As still
// see the original.
type redactedError struct {
	msg string
	err error
}

func (e redactedError) Error() string { return e.msg }
func (e redactedError) Unwrap() error { return e.err }

// RedactError returns err with its text passed through [Redact] (nil for
// nil); errors.Is and errors.As still see err.
func RedactError(err error) error {
	if err == nil {
		return nil
	}
	msg := Redact(err.Error())
	if msg == err.Error() {
		return err
	}
	return redactedError{msg: msg, err: err}
}

const redacted = "[REDACTED]"

// secretPatterns find secrets inside free text: provider API keys, bearer
// tokens and basic credentials, passwords in URLs, and key=value pairs
// whose key names a secret.
var secretPatterns = []struct {
	re   *regexp.Regexp
	repl string
}{
	// user:password@ in any URL (postgres://, nats://, https://).
	{regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*):[^@\s/]*@`), "${1}:" + redacted + "@"},
	// Authorization: Bearer xxx / Basic xxx, and bare "Bearer xxx".
	{regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{4,}`), "${1} " + redacted},
	// OpenAI-style and other well-known key shapes.
	{regexp.MustCompile(`\b(sk|rk|pk)-[A-Za-z0-9_-]{8,}`), redacted},
	{regexp.MustCompile(`\b(ghp|gho|ghs|github_pat|xox[abp])_[A-Za-z0-9_]{8,}`), redacted},
	{regexp.MustCompile(`\bAKIA[0-9A-Z]{16}\b`), redacted},
	// Rath API tokens (rath_…).
	{regexp.MustCompile(`\brath_[A-Za-z0-9_-]{8,}`), redacted},
	// key=value / "key": "value" where key names a secret.
	{regexp.MustCompile(`(?i)((?:api[_-]?key|token|secret|password|passwd)["']?\s*[:=]\s*["']?)[^\s"'&,;]+`), "${1}" + redacted},
}

// Redact replaces the secrets it recognizes in s (API keys such as sk-…,
// bearer and basic credentials, passwords in URLs, key=value secrets) with
// [REDACTED].
func Redact(s string) string {
	if !mayHoldSecret(s) {
		return s
	}
	return redactAll(s)
}

// redactAll is Redact without its filter: every pattern is tried.
func redactAll(s string) string {
	for _, p := range secretPatterns {
		s = p.re.ReplaceAllString(s, p.repl)
	}
	return s
}

// mayHoldSecret reports whether some secretPattern can match s: each needs
// a fixed piece of text (://, bearer or basic, k-, gh or xox, AKIA, rath_,
// or a secret's name beside : or =), and most of what is logged (ids,
// names, counts) holds none, so Redact skips its regular expressions for
// them (they were 3% of a busy worker's CPU). Text with a byte outside
// ASCII is always tried: a case-insensitive pattern also matches the
// non-ASCII forms of its letters (the Kelvin sign for k).
func mayHoldSecret(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return true
		}
	}
	return strings.Contains(s, "://") || strings.Contains(s, "k-") || strings.Contains(s, "gh") ||
		strings.Contains(s, "xox") || strings.Contains(s, "AKIA") || strings.Contains(s, "rath_") ||
		containsFoldASCII(s, "bearer") || containsFoldASCII(s, "basic") ||
		(strings.ContainsAny(s, ":=") && (containsFoldASCII(s, "key") || containsFoldASCII(s, "token") ||
			containsFoldASCII(s, "secret") || containsFoldASCII(s, "passw")))
}

// containsFoldASCII reports whether s holds sub, a lower-case ASCII word,
// in any ASCII case.
func containsFoldASCII(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		// c|0x20 is c in lower case for an ASCII letter.
		if s[i]|0x20 == sub[0] && strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}
