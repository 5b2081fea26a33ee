package lineage_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/session"
)

// FuzzChoice: the graph view reads a selector_decision chunk's payload
// (written by pkg/flow, or imported) to label a node. Whatever the payload,
// Choice never panics and returns one line of valid UTF-8 of at most 40
// runes ("#N", "none", a candidate or "").
func FuzzChoice(f *testing.F) {
	for _, s := range []string{
		`{"choice":"write the tests"}`,
		`{"choice":1,"candidates":["a","b"]}`,
		`{"choice":-1,"candidates":["a"]}`,
		`{"choice":5,"candidates":["a"]}`,
		`{"choice":1.5,"candidates":["a","b"]}`,
		`{"choice":1e300}`,
		`{"choice":-1e300}`,
		`{"choice":0,"candidates":[7]}`,
		`{"chosen":"x\ny\tz"}`,
		`{"selected":""}`,
		`{"route":"` + strings.Repeat("é", 60) + `"}`,
		`{"choice":null,"route":"r"}`,
		`[]`,
		`"x"`,
		`{}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, payload string) {
		c, err := session.NewChunk(session.KindSelectorDecision, []byte(payload))
		if err != nil {
			return // not a chunk the store would hold
		}
		got := lineage.Choice(c)
		if !utf8.ValidString(got) {
			t.Fatalf("Choice(%s) = %q, not UTF-8", payload, got)
		}
		if n := utf8.RuneCountInString(got); n > 40 {
			t.Fatalf("Choice(%s) = %q, %d runes (limit 40)", payload, got, n)
		}
		if strings.ContainsAny(got, "\n\r\t") {
			t.Fatalf("Choice(%s) = %q spans lines", payload, got)
		}
	})
}
