package memory_test

import (
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/memory"
)

// FuzzDecodeMetadata: a stored metadata column never panics the decoder;
// a refusal is an internal *memory.Error naming the metadata; "" and "{}"
// are no metadata; what decodes is the map json.Marshal (what Prepare
// stores) encodes back to.
func FuzzDecodeMetadata(f *testing.F) {
	for _, s := range []string{
		``,
		`{}`,
		`{"source":"notes.md","lang":"en"}`,
		`{"a":"\u00e9","b":""}`,
		`{"a":1}`,
		`{"a":null}`,
		`null`,
		`[]`,
		`{"a":"x"`,
		`{"a":"x","a":"y"}`,
		`"x"`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := memory.DecodeMetadata(s)
		if err != nil {
			var me *memory.Error
			if !errors.As(err, &me) || me.Kind != memory.KindInternal || !strings.Contains(err.Error(), "stored metadata") {
				t.Fatalf("refusal %v is not an internal error naming the metadata", err)
			}
			if m != nil {
				t.Fatalf("refusal returned %v", m)
			}
			return
		}
		if (s == "" || s == "{}") && m != nil {
			t.Fatalf("%q decoded to %v, want none", s, m)
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		back, err := memory.DecodeMetadata(string(b))
		if err != nil || len(back) != len(m) || !maps.Equal(back, m) {
			t.Fatalf("%v re-encoded as %s decodes to %v, %v", m, b, back, err)
		}
	})
}
