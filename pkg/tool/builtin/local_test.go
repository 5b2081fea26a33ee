package builtin_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/sandbox"
	"github.com/rath-run/rath/pkg/sandbox/local"
	"github.com/rath-run/rath/pkg/sandbox/sandboxtest"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/tool"
	"github.com/rath-run/rath/pkg/tool/builtin"
)

func openLocal(t *testing.T) sandbox.Sandbox {
	t.Helper()
	sb, err := local.New(local.Config{}).Open(context.Background(), session.Spec{}, sandboxtest.Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close(context.Background()) })
	return sb
}

func TestFileToolsOnLocal(t *testing.T) {
	t.Parallel()
	fileToolsSuite(t, openLocal(t))
}

func TestShellAndCodeOnLocal(t *testing.T) {
	t.Parallel()
	sb := openLocal(t)
	if _, kind := run(t, sb, "write_workspace_file", `{"path":"a.txt","content":"one\ntwo\n"}`); kind != "" {
		t.Fatal(kind)
	}
	got, kind := run(t, sb, "run_shell_command", `{"cmd":"wc -l < a.txt; echo oops >&2; exit 4"}`)
	var res builtin.CommandResult
	if kind != "" || json.Unmarshal([]byte(got), &res) != nil {
		t.Fatalf("%s %s", got, kind)
	}
	if strings.TrimSpace(res.Stdout) != "2" || res.Stderr != "oops\n" || res.ExitCode != 4 {
		t.Fatalf("%+v", res)
	}
	got, kind = run(t, sb, "run_code", `{"code":"echo hi from sh; cat a.txt | head -1","language":"sh"}`)
	if kind != "" || !strings.Contains(got, `"stdout":"hi from sh\none\n"`) || !strings.Contains(got, `"error":null`) {
		t.Fatalf("%s %s", got, kind)
	}
	if _, kind := run(t, sb, "run_code", `{"code":"sleep 5","language":"sh","timeout":0.2}`); kind != tool.KindTimeout {
		t.Fatalf("timeout kind %q", kind)
	}
	if _, err := exec.LookPath("python3"); err == nil {
		got, kind = run(t, sb, "run_code", `{"code":"import sys\nprint(6*7)\nsys.exit('bad')"}`)
		if kind != "" || !strings.Contains(got, `"stdout":"42\n"`) || !strings.Contains(got, `"error":"bad\n"`) {
			t.Fatalf("python: %s %s", got, kind)
		}
	}
}

func TestClosedSandbox(t *testing.T) {
	t.Parallel()
	sb := openLocal(t)
	if err := sb.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, args string }{
		{"read_workspace_file", `{"path":"a"}`},
		{"write_workspace_file", `{"path":"a","content":""}`},
		{"run_shell_command", `{"cmd":"true"}`},
	} {
		if _, kind := run(t, sb, c.name, c.args); kind != tool.KindSandboxClosed {
			t.Errorf("%s: kind %q", c.name, kind)
		}
	}
}
