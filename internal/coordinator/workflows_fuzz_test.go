package coordinator

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// FuzzParseTimeout checks that a run's timeout parses to a deadline in the
// future or fails as a bad request naming the field, never panicking.
func FuzzParseTimeout(f *testing.F) {
	for _, s := range []string{"", "90s", "10m", "1h30m", "-1s", "0", "1", "abc", "9999999999h", "1e9s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		before := time.Now()
		d, err := parseTimeout(s)
		switch {
		case err != nil:
			if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "timeout") {
				t.Fatalf("parseTimeout(%q) error %v: want a bad request naming timeout", s, err)
			}
		case s == "":
			if d != nil {
				t.Fatalf("empty timeout gave a deadline %v", d)
			}
		case d == nil || !d.After(before):
			t.Fatalf("parseTimeout(%q) = %v, want a deadline after %v", s, d, before)
		}
	})
}
