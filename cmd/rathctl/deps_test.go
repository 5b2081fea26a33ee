package main

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestLinksNoTestPackage keeps test code out of the shipped binaries:
// rathctl (and the coordinator and worker) must link neither testing nor
// net/http/httptest nor any package of ours (or a dependency's) whose name
// ends in "test" (storetest, memorytest, llmtest, testenv's kin). What a
// command needs from such a package belongs in an ordinary one
// (pkg/memory/memcorpus holds the bench's corpus). The standard library's
// internal packages (internal/testlog, internal/synctest), which every
// program links, are not test code.
func TestLinksNoTestPackage(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is required to list the binaries' dependencies: %v", err)
	}
	for _, cmd := range []string{"rathctl", "coordinator", "worker"} {
		t.Run(cmd, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			pkg := "github.com/rath-run/rath/cmd/" + cmd
			var stderr bytes.Buffer
			c := exec.CommandContext(ctx, gobin, "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}", pkg)
			c.Stderr = &stderr
			out, err := c.Output()
			if err != nil {
				t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr.String())
			}
			var bad []string
			for line := range strings.Lines(string(out)) {
				path, std, _ := strings.Cut(strings.TrimSpace(line), " ")
				if path != "" && isTestPackage(path, std == "true") {
					bad = append(bad, path)
				}
			}
			if len(bad) > 0 {
				t.Errorf("%s links test packages %v; move what it needs into an ordinary package (`go list -deps -f '{{.ImportPath}}: {{.Imports}}' %s` shows who imports them)", cmd, bad, pkg)
			}
		})
	}
}

// isTestPackage reports whether the import path names test code.
func isTestPackage(path string, std bool) bool {
	if path == "testing" || strings.HasPrefix(path, "testing/") {
		return true
	}
	if std && (strings.HasPrefix(path, "internal/") || strings.Contains(path, "/internal/")) {
		return false // the runtime's own (internal/testlog, internal/synctest)
	}
	last := path[strings.LastIndex(path, "/")+1:]
	return strings.HasSuffix(last, "test")
}

func TestIsTestPackage(t *testing.T) {
	for path, want := range map[string]bool{
		"testing": true, "testing/fstest": true, "net/http/httptest": true,
		"github.com/rath-run/rath/pkg/memory/memorytest": true,
		"github.com/rath-run/rath/pkg/llm/llmtest":       true,
		"github.com/rath-run/rath/pkg/store/sqlitestore": false,
		"github.com/rath-run/rath/pkg/memory/memcorpus":  false,
		"net/http": false,
	} {
		if got := isTestPackage(path, !strings.Contains(path, ".")); got != want {
			t.Errorf("isTestPackage(%q) = %v, want %v", path, got, want)
		}
	}
	for _, path := range []string{"internal/testlog", "internal/synctest", "net/http/internal/testcert"} {
		if isTestPackage(path, true) {
			t.Errorf("isTestPackage(%q) = true: the standard library's internal packages are not test code", path)
		}
	}
}
