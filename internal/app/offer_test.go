package app_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/pkg/tool"
)

// TestToolOffer: the coordinator's tool offer is the built-ins plus the
// operator's names; "*" checks nothing; a bad name or "*" among names is an
// error naming RATH_TOOLS.
func TestToolOffer(t *testing.T) {
	t.Parallel()
	r, err := app.ToolOffer(" season_for, ,lookup ")
	if err != nil {
		t.Fatal(err)
	}
	names := r.Names()
	for _, want := range []string{"builtin", "read_workspace_file", "season_for", "lookup"} {
		if !slices.Contains(names, want) {
			t.Errorf("offer %v lacks %q", names, want)
		}
	}
	if _, err := r.Select([]string{"builtin", "season_for"}); err != nil {
		t.Errorf("select builtin and season_for: %v", err)
	}
	if _, err := r.Select([]string{"teleport"}); !errors.Is(err, tool.ErrUnknownTool) {
		t.Errorf("select teleport: %v, want unknown tool", err)
	}
	if r, err := app.ToolOffer("*"); r != nil || err != nil {
		t.Errorf(`ToolOffer("*") = %v, %v; want nil, nil (no check)`, r, err)
	}
	for _, bad := range []string{"a,*", "bad name", "builtin", "read_workspace_file"} {
		if _, err := app.ToolOffer(bad); err == nil || !strings.Contains(err.Error(), "RATH_TOOLS") {
			t.Errorf("ToolOffer(%q) = %v; want an error naming RATH_TOOLS", bad, err)
		}
	}
}

// TestMCPOffer: the coordinator reads RATH_MCP_ALLOW as the workers do.
func TestMCPOffer(t *testing.T) {
	t.Parallel()
	p := app.MCPOffer(" /usr/bin/a , /usr/bin/b")
	if !p.Allows("/usr/bin/a") || !p.Allows("/usr/bin/b") || p.Allows("/bin/sh") || p.Allows("a") {
		t.Errorf("MCPOffer(a, b) = %+v", p)
	}
	if app.MCPOffer("").Allows("/usr/bin/a") {
		t.Error("an unset RATH_MCP_ALLOW allows a command")
	}
	if !app.MCPOffer("*").Allows("/anything") {
		t.Error(`"*" does not allow any command`)
	}
}
