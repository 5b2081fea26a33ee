package session

import (
	"bytes"
	"testing"
)

// canonicalCases are values the fast path must prove canonical (fast) or
// leave to the re-encode (not fast), with what the re-encode makes of them.
var canonicalCases = []struct {
	in   string
	fast bool
}{
	{`"model"`, true},
	{`1`, true},
	{`-0.5e+10`, true},
	{`[{"completion_tokens":1,"prompt_tokens":1,"total_tokens":2}]`, true},
	{`{"a":[true,false,null],"b":{"c":"d\n\"\\\t\r"},"é":"ü"}`, true},
	{`{}`, true},
	{`[]`, true},
	{`"a\u0041"`, false},     // the encoder writes "aA"
	{`"\/"`, false},          // the encoder writes "/"
	{`"\u2028"`, false},      // escaped by the encoder, but left to it
	{"\"\u2028\"", false},    // the encoder escapes it
	{"\"\xff\"", false},      // invalid UTF-8
	{`{"b":1,"a":2}`, false}, // unsorted
	{`{"a":1,"a":2}`, false}, // repeated: the decoder keeps one
	{`{"a":1, "b":2}`, false},
	{` 1`, false},
	{`1 `, false},
	{`01`, false},
	{`1.`, false},
	{`.5`, false},
	{`+1`, false},
	{`tru`, false},
	{`truex`, false},
	{`[1,]`, false},
	{`{"a\u0062":1}`, false},
	{``, false},
}

func TestCanonicalFastPath(t *testing.T) {
	for _, c := range canonicalCases {
		if got := isCanonical([]byte(c.in)); got != c.fast {
			t.Errorf("isCanonical(%q) = %v, want %v", c.in, got, c.fast)
		}
		if !c.fast {
			continue
		}
		slow, err := reencodeJSON([]byte(c.in))
		if err != nil || !bytes.Equal(slow, []byte(c.in)) {
			t.Errorf("%q: proven canonical, but the re-encode gives %q, %v", c.in, slow, err)
		}
	}
}

// FuzzCanonicalFastPath: whatever isCanonical proves canonical, the
// re-encode leaves byte for byte as it is.
func FuzzCanonicalFastPath(f *testing.F) {
	for _, c := range canonicalCases {
		f.Add([]byte(c.in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !isCanonical(b) {
			return
		}
		slow, err := reencodeJSON(b)
		if err != nil {
			t.Fatalf("%q: proven canonical, but the re-encode fails: %v", b, err)
		}
		if !bytes.Equal(slow, b) {
			t.Fatalf("%q: proven canonical, but the re-encode gives %q", b, slow)
		}
	})
}
