package app_test

import (
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/pkg/workspace"
)

func TestWorkspaceLimits(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	l, err := app.WorkspaceLimits(env(nil))
	if err != nil || l != (workspace.Limits{}).WithDefaults() {
		t.Fatalf("defaults: %+v, %v", l, err)
	}
	l, err = app.WorkspaceLimits(env(map[string]string{
		"RATH_WORKSPACE_MAX_BYTES": "1000", "RATH_WORKSPACE_MAX_FILES": "10", "RATH_WORKSPACE_MAX_FILE_BYTES": "100",
	}))
	if err != nil || l.MaxTotalBytes != 1000 || l.MaxFiles != 10 || l.MaxFileBytes != 100 {
		t.Fatalf("set: %+v, %v", l, err)
	}
	for _, bad := range []string{"-1", "0", "1e6", "lots"} {
		_, err := app.WorkspaceLimits(env(map[string]string{"RATH_WORKSPACE_MAX_FILES": bad}))
		if err == nil || !strings.Contains(err.Error(), "RATH_WORKSPACE_MAX_FILES") {
			t.Errorf("RATH_WORKSPACE_MAX_FILES=%s: %v, want an error naming the variable", bad, err)
		}
	}
}
