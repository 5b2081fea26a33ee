package store_test

import (
	"math"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/store"
)

// FuzzDecodeCursor: a list cursor comes from a client (?after=), so the
// decoder must refuse anything it did not issue without panicking, naming
// the cursor; an accepted cursor is a non-negative position whose own
// cursor decodes to the same position; every position's cursor round-trips.
func FuzzDecodeCursor(f *testing.F) {
	for _, c := range []string{
		store.EncodeCursor(0),
		store.EncodeCursor(42),
		store.EncodeCursor(math.MaxInt64),
		"djE6LTE",                        // v1:-1
		"djE6",                           // v1:
		"djE6MDA3",                       // v1:007
		"djI6MQ",                         // v2:1
		"djE6MSA",                        // v1:1 (trailing space)
		"djE6OTIyMzM3MjAzNjg1NDc3NTgwOA", // v1:MaxInt64+1
		"djE6MQ==",                       // padded
		"",
		"!!!",
	} {
		f.Add(c, int64(7))
	}
	f.Fuzz(func(t *testing.T, c string, seq int64) {
		got, err := store.DecodeCursor(c)
		switch {
		case err != nil:
			if got != 0 {
				t.Fatalf("refusal returned position %d", got)
			}
			if !strings.Contains(err.Error(), "cursor") {
				t.Fatalf("refusal %q does not name the cursor", err)
			}
		case got < 0:
			t.Fatalf("%q decoded to negative %d", c, got)
		default:
			if again, err := store.DecodeCursor(store.EncodeCursor(got)); err != nil || again != got {
				t.Fatalf("%q → %d, re-encoded → %d, %v", c, got, again, err)
			}
		}
		if seq >= 0 {
			if back, err := store.DecodeCursor(store.EncodeCursor(seq)); err != nil || back != seq {
				t.Fatalf("EncodeCursor(%d) decodes to %d, %v", seq, back, err)
			}
		}
	})
}
