package memory

import (
	"fmt"
	"strings"
)

// Scheme is the URI scheme of memory items.
const Scheme = "memory://"

// MaxURIBytes bounds a URI's length.
const MaxURIBytes = 1024

// Scopes are the URI scopes OpenRath knows, in sorted order (OpenRath's
// corpus walk order).
var scopes = [...]string{"agent", "resources", "session", "user"}

// URI is a parsed memory URI: memory://<Scope>/<Segments joined by '/'>.
type URI struct {
	Scope    string
	Segments []string
}

// String returns the canonical form, memory://scope/seg/….
func (u URI) String() string {
	if len(u.Segments) == 0 {
		return Scheme + u.Scope
	}
	return Scheme + u.Scope + "/" + strings.Join(u.Segments, "/")
}

func validScope(s string) bool {
	for _, sc := range scopes {
		if s == sc {
			return true
		}
	}
	return false
}

// ParseURI parses the URI of one item. It needs a scope and at least one
// segment; a trailing '/' is refused (an item is not a directory).
func ParseURI(s string) (URI, error) {
	u, err := parse(s)
	if err != nil {
		return URI{}, err
	}
	if len(u.Segments) == 0 {
		return URI{}, invalidURI(s, "names only the scope %q; an item needs a path below it", u.Scope)
	}
	return u, nil
}

// ParseScope parses a recall or list scope: "" (the whole namespace),
// memory://<scope>, or a directory below it (a trailing '/' is allowed).
// It returns the prefix items in that scope start with: "" or the canonical
// URI followed by '/'.
func ParseScope(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	u, err := parse(strings.TrimSuffix(s, "/"))
	if err != nil {
		return "", err
	}
	return u.String() + "/", nil
}

func parse(s string) (URI, error) {
	if s == "" {
		return URI{}, invalidURI(s, "empty")
	}
	if len(s) > MaxURIBytes {
		return URI{}, invalidURI(s[:32]+"…", "%d bytes, over the %d-byte limit (MaxURIBytes)", len(s), MaxURIBytes)
	}
	rest, ok := strings.CutPrefix(s, Scheme)
	if !ok {
		scheme, _, found := strings.Cut(s, "://")
		if found {
			return URI{}, invalidURI(s, "scheme %q is not memory://", scheme+"://")
		}
		return URI{}, invalidURI(s, "does not start with memory://")
	}
	for i := 0; i < len(rest); i++ {
		if c := rest[i]; c < 0x20 || c == 0x7f || c == '\\' {
			return URI{}, invalidURI(s, "control character or backslash at byte %d", len(Scheme)+i)
		}
	}
	parts := strings.Split(rest, "/")
	scope := parts[0]
	if scope == "" {
		return URI{}, invalidURI(s, "no scope (want one of %s)", strings.Join(scopes[:], ", "))
	}
	if !validScope(scope) {
		return URI{}, invalidURI(s, "unknown scope %q (want one of %s)", scope, strings.Join(scopes[:], ", "))
	}
	segs := parts[1:]
	for i, seg := range segs {
		switch seg {
		case "":
			return URI{}, invalidURI(s, "empty segment %d", i+1)
		case ".", "..":
			return URI{}, invalidURI(s, "segment %d is %q", i+1, seg)
		}
	}
	return URI{Scope: scope, Segments: segs}, nil
}

func invalidURI(uri, format string, args ...any) error {
	return &Error{Kind: KindInvalidURI, Message: fmt.Sprintf("memory uri %q: ", uri) + fmt.Sprintf(format, args...)}
}
