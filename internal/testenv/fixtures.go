package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// OpenRathFixtures returns shared/fixtures/openrath (files OpenRath 1.2.0
// itself wrote), found by walking up from the test's working directory:
// the repository and shared/ are siblings (…/main and …/shared), in CI
// too. It fails t when they are not there: the interop tests are never
// skipped quietly.
func OpenRathFixtures(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		cand := filepath.Join(dir, "shared", "fixtures", "openrath")
		if st, err := os.Stat(cand); err == nil && st.IsDir() {
			return cand
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("shared/fixtures/openrath not found above the working directory: the repository needs ../shared beside it")
			return ""
		}
		dir = parent
	}
}
