package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// RequireChromium returns the path of a Chromium (or Chrome) executable:
// $RATH_CHROMIUM, else chromium, chromium-browser or google-chrome on PATH.
// Without one it skips t, or fails it when RATH_REQUIRE_CHROMIUM=1 or
// CI=true (scripts/test.sh installs Debian's chromium when it is missing).
func RequireChromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("RATH_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("RATH_REQUIRE_CHROMIUM") == "1" || os.Getenv("CI") == "true" {
		t.Fatal("Chromium required (RATH_REQUIRE_CHROMIUM=1 or CI=true) but not found: apt-get install -y --no-install-recommends chromium")
	}
	t.Skip("no Chromium on PATH (set RATH_REQUIRE_CHROMIUM=1 to fail instead)")
	return ""
}
