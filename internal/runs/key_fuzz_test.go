package runs_test

import (
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/runs"
)

// FuzzValidKey checks that ValidKey accepts exactly the keys of
// [A-Za-z0-9._-]{1,MaxKeyLen}, and that an accepted key makes a step id
// whose key part reads back unchanged.
func FuzzValidKey(f *testing.F) {
	for _, s := range []string{"1", "3.b2.1", "a/b", "", " ", "é", strings.Repeat("k", runs.MaxKeyLen+1), "merge_1-2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		err := runs.ValidKey(key)
		ok := key != "" && len(key) <= runs.MaxKeyLen
		for i := range len(key) {
			c := key[i]
			allowed := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
			ok = ok && allowed
		}
		if (err == nil) != ok {
			t.Fatalf("ValidKey(%q) = %v, want ok=%v", key, err, ok)
		}
		if err != nil && !strings.Contains(err.Error(), "step key") {
			t.Fatalf("error %q does not name the field", err)
		}
		if ok {
			id := runs.KeyedStepID("run_x", key)
			if got := strings.TrimPrefix(id, "run_x/"); got != key {
				t.Fatalf("key %q read back as %q", key, got)
			}
		}
	})
}
