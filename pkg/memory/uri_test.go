package memory_test

import (
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/memory"
)

func TestParseURI(t *testing.T) {
	good := map[string]string{
		"memory://user/memories/preferences/dark_mode": "memory://user/memories/preferences/dark_mode",
		"memory://agent/x":              "memory://agent/x",
		"memory://resources/a/b.md":     "memory://resources/a/b.md",
		"memory://session/s1/commits/1": "memory://session/s1/commits/1",
	}
	for in, want := range good {
		u, err := memory.ParseURI(in)
		if err != nil {
			t.Errorf("ParseURI(%q): %v", in, err)
			continue
		}
		if u.String() != want {
			t.Errorf("ParseURI(%q).String() = %q", in, u.String())
		}
	}
	bad := map[string]string{
		"":                       "empty",
		"memory://":              "no scope",
		"memory://user":          "names only the scope",
		"memory://user/":         "empty segment 1",
		"memory://user/a//b":     "empty segment 2",
		"memory://user/./a":      `segment 1 is "."`,
		"memory://user/a/..":     `segment 2 is ".."`,
		"memory://tenant/a":      `unknown scope "tenant"`,
		"viking://user/a":        `scheme "viking://"`,
		"file:///etc/passwd":     `scheme "file://"`,
		"user/a":                 "does not start with memory://",
		"memory://user/a\nb":     "control character",
		"memory://user/a\\..\\b": "backslash",
		"memory://user/" + strings.Repeat("a", 2000): "MaxURIBytes",
	}
	for in, want := range bad {
		_, err := memory.ParseURI(in)
		if err == nil {
			t.Errorf("ParseURI(%q) accepted", in)
			continue
		}
		if !memory.IsKind(err, memory.KindInvalidURI) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseURI(%q) = %v, want invalid_uri naming %q", in, err, want)
		}
	}
}

func TestParseScope(t *testing.T) {
	for in, want := range map[string]string{
		"":                       "",
		"memory://user":          "memory://user/",
		"memory://user/":         "memory://user/",
		"memory://user/memories": "memory://user/memories/",
	} {
		got, err := memory.ParseScope(in)
		if err != nil || got != want {
			t.Errorf("ParseScope(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := memory.ParseScope("memory://nope"); !memory.IsKind(err, memory.KindInvalidURI) {
		t.Errorf("ParseScope(unknown scope) = %v", err)
	}
}

func TestPrepareLimits(t *testing.T) {
	_, err := memory.Prepare("", memory.Write{URI: "memory://user/big", Text: strings.Repeat("x", memory.MaxTextBytes+1)})
	if !memory.IsKind(err, memory.KindTooLarge) || !strings.Contains(err.Error(), "MaxTextBytes") {
		t.Fatalf("huge text: %v", err)
	}
	_, err = memory.Prepare("", memory.Write{URI: "memory://user/m", Text: "x", Metadata: map[string]string{"k": strings.Repeat("v", memory.MaxMetadataBytes)}})
	if !memory.IsKind(err, memory.KindTooLarge) || !strings.Contains(err.Error(), "MaxMetadataBytes") {
		t.Fatalf("huge metadata: %v", err)
	}
	_, err = memory.Prepare(strings.Repeat("n", 300), memory.Write{URI: "memory://user/m", Text: "x"})
	if !memory.IsKind(err, memory.KindInvalidArgument) || !strings.Contains(err.Error(), "MaxNamespaceBytes") {
		t.Fatalf("long namespace: %v", err)
	}
	p, err := memory.Prepare("", memory.Write{URI: "memory://user/m", Text: "Go go GO test"})
	if err != nil || p.Namespace != memory.DefaultNamespace || p.DL != 4 || p.Terms["go"] != 3 {
		t.Fatalf("Prepare = %+v, %v", p, err)
	}
}

func FuzzParseURI(f *testing.F) {
	for _, s := range []string{"", "memory://user/a", "memory://user/./a", "memory://agent/a/../b", "viking://user/x", "memory:///", "memory://user//", "memory://resources/中文/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := memory.ParseURI(s)
		if err != nil {
			if !memory.IsKind(err, memory.KindInvalidURI) {
				t.Fatalf("ParseURI(%q): error of another kind: %v", s, err)
			}
			return
		}
		// A parsed URI round-trips and names no escaping segment.
		again, err := memory.ParseURI(u.String())
		if err != nil || again.String() != u.String() || u.String() != s {
			t.Fatalf("ParseURI(%q) round trip: %q, %v", s, again.String(), err)
		}
		for _, seg := range u.Segments {
			if seg == "" || seg == "." || seg == ".." || strings.Contains(seg, "/") {
				t.Fatalf("ParseURI(%q) kept segment %q", s, seg)
			}
		}
		if _, err := memory.ParseScope(s); err != nil {
			t.Fatalf("ParseScope(%q) refused a valid item URI: %v", s, err)
		}
	})
}
