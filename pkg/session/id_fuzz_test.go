package session_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/session"
)

// FuzzParseID: a version id from a URL path, a request body or a stored
// row never panics the parser; what it refuses is ErrInvalidID naming the
// input; what it accepts prints as a canonical id that parses back to the
// same id.
func FuzzParseID(f *testing.F) {
	for _, s := range []string{
		"0199a3a4-7d5c-7000-8000-000000000000",
		"0199A3A4-7D5C-7000-8000-000000000000",
		"{0199a3a4-7d5c-7000-8000-000000000000}",
		"urn:uuid:0199a3a4-7d5c-7000-8000-000000000000",
		"0199a3a47d5c70008000000000000000",
		"0199a3a4-7d5c-7000-8000-00000000000",
		"0199a3a4-7d5c-7000-8000-00000000000g",
		"",
		"not-a-uuid",
		"\x00\xff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := session.ParseID(s)
		if err != nil {
			if !errors.Is(err, session.ErrInvalidID) {
				t.Fatalf("refusal %v is not ErrInvalidID", err)
			}
			if id != (session.ID{}) {
				t.Fatalf("refusal returned id %s", id)
			}
			if !strings.Contains(err.Error(), "is not a version id") {
				t.Fatalf("refusal %q does not say what is wrong", err)
			}
			return
		}
		again, err := session.ParseID(id.String())
		if err != nil || again != id {
			t.Fatalf("%q parsed to %s, whose string parses to %s, %v", s, id, again, err)
		}
		if len(id.String()) != 36 {
			t.Fatalf("id %q is not canonical", id.String())
		}
	})
}
