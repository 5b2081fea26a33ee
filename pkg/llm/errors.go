package llm

import (
	"fmt"
	"strings"
	"time"
)

// Error is a failed model call. Its message never contains the API key: the
// provider redacts it from anything an endpoint or transport echoes. Test it
// with errors.Is against [ErrTransient] / [ErrPermanent], or errors.As for
// the details.
type Error struct {
	// Op names the operation, such as "chat" or "chat stream".
	Op string
	// StatusCode is the HTTP status, or 0 when no response was received.
	StatusCode int
	// Type and Code are the endpoint's error type and code, when it sent them.
	Type, Code string
	// Message describes the failure, with secrets redacted.
	Message string
	// Attempts is how many HTTP calls were made.
	Attempts int
	// RetryAfter is the delay the endpoint asked for (Retry-After), when it
	// asked for one; a worker should wait at least this long before retrying.
	RetryAfter time.Duration
	// Transient reports whether retrying later may succeed.
	Transient bool

	// cause is a context error or a sentinel of this package; never an
	// error that could carry the request or the key.
	cause error
}

// Error returns a one-line description.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("llm ")
	b.WriteString(e.Op)
	if e.StatusCode != 0 {
		fmt.Fprintf(&b, ": status %d", e.StatusCode)
	}
	if e.Type != "" || e.Code != "" {
		fmt.Fprintf(&b, " (%s)", strings.Trim(e.Type+" "+e.Code, " "))
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " (after %d attempts)", e.Attempts)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
	}
	return b.String()
}

// Is matches ErrTransient or ErrPermanent according to the classification.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrTransient:
		return e.Transient
	case ErrPermanent:
		return !e.Transient
	}
	return false
}

// Unwrap returns the context error that ended the call, if any.
func (e *Error) Unwrap() error { return e.cause }

// permanentf returns a permanent error for invalid input or configuration.
func permanentf(op, format string, args ...any) *Error {
	return &Error{Op: op, Message: fmt.Sprintf(format, args...)}
}

// redact removes secret from s, replacing it with "[REDACTED]". Secrets of
// fewer than 4 bytes are not searched for: they would mangle ordinary text
// and protect nothing.
func redact(s, secret string) string {
	if len(secret) < 4 {
		return s
	}
	return strings.ReplaceAll(s, secret, "[REDACTED]")
}
