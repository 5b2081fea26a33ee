package cli

import (
	"testing"
)

// migrated makes a SQLite store at path with `rathctl migrate` (the only
// command besides dev and demo that creates one) and returns its URL.
func migrated(t *testing.T, path string) string {
	t.Helper()
	u := "sqlite:" + path
	if code, _, errOut := rathctl(t, "", "migrate", "--store", u); code != 0 {
		t.Fatalf("migrate %s: exit %d: %s", u, code, errOut)
	}
	return u
}
