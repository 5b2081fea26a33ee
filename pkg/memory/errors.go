package memory

import (
	"errors"
	"fmt"
)

// Kind classifies an [*Error], after OpenRath's MemoryExecutionFailure kinds.
type Kind string

// Error kinds.
const (
	KindInvalidURI      Kind = "invalid_uri"
	KindInvalidArgument Kind = "invalid_argument"
	KindNotFound        Kind = "not_found"
	KindTooLarge        Kind = "too_large"
	KindStoreClosed     Kind = "store_closed"
	KindInternal        Kind = "internal"
)

// Error is a memory operation's failure.
type Error struct {
	Kind    Kind
	Message string
}

func (e *Error) Error() string { return "memory: " + string(e.Kind) + ": " + e.Message }

// Is reports whether target is an *Error of the same kind, so
// errors.Is(err, &memory.Error{Kind: memory.KindNotFound}) works.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Kind == e.Kind && t.Message == ""
}

// Sentinels for errors.Is.
var (
	ErrInvalidURI = &Error{Kind: KindInvalidURI}
	ErrNotFound   = &Error{Kind: KindNotFound}
	ErrTooLarge   = &Error{Kind: KindTooLarge}
)

// IsKind reports whether err is an *Error of kind k.
func IsKind(err error, k Kind) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == k
}

func errorf(k Kind, format string, args ...any) error {
	return &Error{Kind: k, Message: fmt.Sprintf(format, args...)}
}
