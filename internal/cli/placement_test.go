package cli

import (
	"strings"
	"testing"
)

func TestParseSandbox(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, backend, image, err string }{
		{"", "", "", ""},
		{"local", "local", "", ""},
		{"docker", "docker", "", ""},
		{"docker:rath-sandbox:busybox", "docker", "rath-sandbox:busybox", ""},
		{"docker:", "", "", "needs an image"},
		{"local:x", "", "", "local takes no image"},
		{"vm", "", "", `backend: "vm"`},
	} {
		p, err := parseSandbox(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "--sandbox")):
			t.Errorf("parseSandbox(%q) = %v, want an error naming --sandbox with %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || p.Backend != tc.backend || p.Spec.Image != tc.image):
			t.Errorf("parseSandbox(%q) = %+v, %v; want %s %s", tc.in, p, err, tc.backend, tc.image)
		}
	}
}
