package hostfs

import (
	"errors"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/sandbox"
)

func TestClean(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in, want string
		outside  bool
	}{
		{"", ".", false}, {".", ".", false}, {"a/b/../c", "a/c", false}, {"./a//b/", "a/b", false},
		{"..", "", true}, {"../a", "", true}, {"a/../../b", "", true}, {"/etc", "", true}, {`\x`, "", true},
	} {
		got, err := Clean(c.in)
		if c.outside {
			if !errors.Is(err, sandbox.ErrOutsideWorkspace) {
				t.Errorf("Clean(%q) err = %v, want ErrOutsideWorkspace", c.in, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Clean(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if _, err := Clean("a\x00b"); err == nil {
		t.Error("NUL byte accepted")
	}
}

// FuzzClean: whatever Clean accepts is relative, clean and stays below the
// root.
func FuzzClean(f *testing.F) {
	for _, s := range []string{"", ".", "a/b", "../x", "/etc/passwd", "a/../../b", "a/./b//c/", `..\..\x`, "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		c, err := Clean(p)
		if err != nil {
			return
		}
		if path.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../") || path.Clean(c) != c || strings.ContainsRune(c, 0) {
			t.Fatalf("Clean(%q) = %q escapes or is not clean", p, c)
		}
	})
}

func TestEscapes(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(base, "d/e"), 0o755))
	must(os.Symlink("d/e", filepath.Join(base, "in")))
	must(os.Symlink("../..", filepath.Join(base, "d/up")))
	must(os.Symlink("/etc", filepath.Join(base, "abs")))
	must(os.Symlink("loop", filepath.Join(base, "loop")))
	for rel, want := range map[string]bool{
		"d/e": false, "in": false, "in/..": false, "in/../..": false, "in/../../..": true,
		"d/up": true, "d/up/x": true, "abs": true, "abs/passwd": true, "missing/x": false, "loop": false,
	} {
		if got := escapes(base, rel); got != want {
			t.Errorf("escapes(%q) = %v, want %v", rel, got, want)
		}
	}
}
