package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/tool"
	"github.com/rath-run/rath/pkg/tool/mcp"
)

func newManager(t *testing.T, cfg mcp.Config) *mcp.Manager {
	t.Helper()
	if cfg.AllowCommands == nil {
		cfg.AllowCommands = []string{serverBin}
	}
	if cfg.Env == nil {
		cfg.Env = mcp.HostEnv(os.Getenv)
	}
	cfg.TerminateTimeout = time.Second
	m, err := mcp.NewManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func spec(name string, args ...string) agent.MCPServer {
	return agent.MCPServer{Name: name, Command: serverBin, Args: args}
}

// tools lists the spec's tools by model-facing name.
func tools(t *testing.T, m *mcp.Manager, specs ...agent.MCPServer) map[string]tool.Tool {
	t.Helper()
	ts, err := m.Tools(context.Background(), specs)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]tool.Tool{}
	for _, tl := range ts {
		out[tl.Def().Name] = tl
	}
	return out
}

// call calls a tool and returns its result as JSON.
func call(t *testing.T, tl tool.Tool, args string) (string, error) {
	t.Helper()
	v, err := tl.Call(context.Background(), tool.Env{}, json.RawMessage(args))
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("result of %s does not marshal: %v", tl.Def().Name, err)
	}
	return string(b), nil
}

func mustCall(t *testing.T, tl tool.Tool, args string) string {
	t.Helper()
	out, err := call(t, tl, args)
	if err != nil {
		t.Fatalf("%s(%s): %v", tl.Def().Name, args, err)
	}
	return out
}

// pid asks the server for its pid.
func pid(t *testing.T, ts map[string]tool.Tool, server string) string {
	t.Helper()
	var r struct{ Text string }
	if err := json.Unmarshal([]byte(mustCall(t, ts[server+"__pid"], `{}`)), &r); err != nil || r.Text == "" {
		t.Fatalf("pid: %q %v", r.Text, err)
	}
	return r.Text
}

// toolError asserts err is a tool error of kind and returns its message.
func toolError(t *testing.T, err error, kind string) string {
	t.Helper()
	var te *tool.Error
	if !errors.As(err, &te) || te.Kind != kind {
		t.Fatalf("err = %#v (%v), want a tool.Error of kind %s", err, err, kind)
	}
	return te.Message
}

func TestDiscoveryAndCalls(t *testing.T) {
	t.Parallel()
	m := newManager(t, mcp.Config{})
	ts := tools(t, m, spec("srv"))
	for _, name := range []string{"srv__echo", "srv__fail", "srv__crash", "srv__sleep", "srv__dotted_name_v2"} {
		if _, ok := ts[name]; !ok {
			t.Fatalf("no tool %s among %v", name, ts)
		}
	}
	d := ts["srv__echo"].Def()
	if d.Description != "Echoes text." {
		t.Fatalf("description = %q", d.Description)
	}
	var schema struct {
		Type       string
		Properties map[string]any
		Required   []string
	}
	if err := json.Unmarshal(d.Parameters, &schema); err != nil || schema.Type != "object" ||
		schema.Properties["text"] == nil || schema.Required[0] != "text" {
		t.Fatalf("parameters = %s (%v)", d.Parameters, err)
	}
	if k := ts["srv__echo"].ResourceKey(nil); k != "mcp:srv" || ts["srv__sleep"].ResourceKey(nil) != k {
		t.Fatalf("resource key = %q", k)
	}
	// The tool set is a valid tool.Set: names and schemas pass its checks.
	list := make([]tool.Tool, 0, len(ts))
	for _, tl := range ts {
		list = append(list, tl)
	}
	if _, err := tool.NewSet(list...); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct{ tool, args, want string }{
		{"srv__echo", `{"text":"hi there"}`, `{"text":"hi there"}`},
		{"srv__lines", `{}`, `{"text":"first\nsecond"}`},
		{"srv__lines", ``, `{"text":"first\nsecond"}`},
		{"srv__structured", `{}`, `{"answer":42}`},
		{"srv__empty", `{}`, `{"ok":true}`},
		{"srv__dotted_name_v2", `{}`, `{"text":"dotted"}`},
		{"srv__image", `{}`, `{"content":[{"type":"text","text":"a pixel"},{"type":"image","mimeType":"image/png","data":"iVBORw=="}]}`},
	} {
		if got := mustCall(t, ts[tc.tool], tc.args); got != tc.want {
			t.Errorf("%s(%s) = %s, want %s", tc.tool, tc.args, got, tc.want)
		}
	}
}

func TestErrorResults(t *testing.T) {
	t.Parallel()
	m := newManager(t, mcp.Config{})
	ts := tools(t, m, spec("srv"))
	_, err := call(t, ts["srv__fail"], `{}`)
	if msg := toolError(t, err, tool.KindExecution); msg != "disk on fire" {
		t.Fatalf("isError message = %q", msg)
	}
	_, err = call(t, ts["srv__protocol_error"], `{}`)
	if msg := toolError(t, err, tool.KindExecution); !strings.Contains(msg, "no such widget") || !strings.Contains(msg, "mcp server srv") {
		t.Fatalf("protocol error message = %q", msg)
	}
	// The server survives both.
	mustCall(t, ts["srv__echo"], `{"text":"still here"}`)
}

func TestOneSessionPerServer(t *testing.T) {
	t.Parallel()
	m := newManager(t, mcp.Config{})
	a := tools(t, m, spec("srv"))
	first := pid(t, a, "srv")
	// Another agent naming the same server, with an allowlist, shares it.
	only := spec("srv")
	only.Tools = []string{"pid", "echo"}
	b := tools(t, m, only)
	if len(b) != 2 {
		t.Fatalf("allowlisted tools = %v", b)
	}
	if p := pid(t, b, "srv"); p != first {
		t.Fatalf("second agent got pid %s, want the shared %s", p, first)
	}
	// Concurrent calls all go through the one session.
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			want := fmt.Sprintf(`{"text":"n%d"}`, i)
			got, err := call(t, a["srv__echo"], want)
			if err == nil && got != want {
				err = fmt.Errorf("got %s, want %s", got, want)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if p := pid(t, a, "srv"); p != first {
		t.Fatalf("pid changed to %s", p)
	}
	// A different spec (other env) is another process.
	other := spec("srv")
	other.Env = map[string]string{"X": "1"}
	if p := pid(t, tools(t, m, other), "srv"); p == first {
		t.Fatal("a server with another env shares the process")
	}
}

func TestCrashRestarts(t *testing.T) {
	t.Parallel()
	m := newManager(t, mcp.Config{RestartBackoff: 10 * time.Millisecond})
	ts := tools(t, m, spec("srv"))
	before := pid(t, ts, "srv")
	_, err := call(t, ts["srv__crash"], `{}`)
	msg := toolError(t, err, tool.KindExecution)
	for _, want := range []string{"mcp server srv", "exit status 3", "crashing as asked"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("crash message %q lacks %q", msg, want)
		}
	}
	after := pid(t, ts, "srv")
	if after == before {
		t.Fatalf("pid %s after a crash: not restarted", after)
	}
	// Listing again works on the new process.
	if _, ok := tools(t, m, spec("srv"))["srv__echo"]; !ok {
		t.Fatal("no tools after restart")
	}
}

func TestGarbageMidSession(t *testing.T) {
	t.Parallel()
	m := newManager(t, mcp.Config{RestartBackoff: 10 * time.Millisecond})
	ts := tools(t, m, spec("srv"))
	before := pid(t, ts, "srv")
	_, err := call(t, ts["srv__garble"], `{}`)
	if msg := toolError(t, err, tool.KindExecution); !strings.Contains(msg, "mcp server srv") {
		t.Fatalf("garbage message = %q", msg)
	}
	if after := pid(t, ts, "srv"); after == before {
		t.Fatal("the server that broke the protocol was not replaced")
	}
}

func TestStartFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		spec agent.MCPServer
		want []string
	}{
		{"exits", spec("srv", "-exit", "2"), []string{"mcp[0] srv", "exit status 2", "told to exit at start"}},
		{"hangs", spec("srv", "-hang"), []string{"mcp[0] srv", "no answer to initialize within 300ms"}},
		{"garbage", spec("srv", "-garbage"), []string{"mcp[0] srv", "initialize failed"}},
		{"missing", agent.MCPServer{Name: "srv", Command: "/nonexistent/mcp"}, []string{"cannot run \"/nonexistent/mcp\""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, mcp.Config{InitTimeout: 300 * time.Millisecond, AllowCommands: []string{"*"}})
			_, err := m.Tools(context.Background(), []agent.MCPServer{tc.spec})
			if !errors.Is(err, mcp.ErrServer) {
				t.Fatalf("err = %v, want ErrServer", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("err %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestRestartBackoff(t *testing.T) {
	t.Parallel()
	m := newManager(t, mcp.Config{RestartBackoff: time.Hour})
	specs := []agent.MCPServer{spec("srv", "-exit", "2")}
	if _, err := m.Tools(context.Background(), specs); !errors.Is(err, mcp.ErrServer) {
		t.Fatalf("first start: %v", err)
	}
	// Within the backoff a caller with a deadline fails fast with the reason.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := m.Tools(ctx, specs)
	if !errors.Is(err, mcp.ErrServer) || !strings.Contains(err.Error(), "next restart in") ||
		!strings.Contains(err.Error(), "exit status 2") {
		t.Fatalf("second start: %v", err)
	}
}

func TestNotAllowed(t *testing.T) {
	t.Parallel()
	m := newManager(t, mcp.Config{AllowCommands: []string{"/usr/bin/other"}})
	_, err := m.Tools(context.Background(), []agent.MCPServer{spec("srv")})
	if !errors.Is(err, mcp.ErrNotAllowed) || !strings.Contains(err.Error(), serverBin) {
		t.Fatalf("err = %v", err)
	}
	// The zero Config allows nothing.
	m2, err := mcp.NewManager(mcp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if _, err := m2.Tools(context.Background(), []agent.MCPServer{spec("srv")}); !errors.Is(err, mcp.ErrNotAllowed) {
		t.Fatalf("zero config: %v", err)
	}
}

func TestInvalidSpecs(t *testing.T) {
	t.Parallel()
	m := newManager(t, mcp.Config{})
	only := spec("srv")
	only.Tools = []string{"echo", "nope"}
	_, err := m.Tools(context.Background(), []agent.MCPServer{only})
	if err == nil || !strings.Contains(err.Error(), `tools[1]: the server offers no tool "nope"`) {
		t.Fatalf("err = %v", err)
	}
	_, err = m.Tools(context.Background(), []agent.MCPServer{{Name: "Bad Name", Command: serverBin}})
	if !errors.Is(err, agent.ErrInvalidSpec) || !strings.Contains(err.Error(), "mcp[0]") {
		t.Fatalf("err = %v", err)
	}
}

// TestEnvScrubbed sets a variable in the test process (so it cannot run in
// parallel) and checks the server does not see it.
func TestEnvScrubbed(t *testing.T) {
	t.Setenv("RATH_TEST_SECRET", "s3cret")
	m := newManager(t, mcp.Config{Env: map[string]string{"PATH": "/usr/bin:/bin", "HOME": "/nowhere"}})
	s := spec("srv")
	s.Env = map[string]string{"FOO": "bar", "HOME": "/override"}
	out := mustCall(t, tools(t, m, s)["srv__env"], `{}`)
	var r struct{ Text string }
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if want := "FOO=bar\nHOME=/override\nPATH=/usr/bin:/bin"; r.Text != want {
		t.Fatalf("server env = %q, want %q", r.Text, want)
	}
}

func TestCallTimeout(t *testing.T) {
	t.Parallel()
	m := newManager(t, mcp.Config{})
	s := spec("srv")
	s.TimeoutSeconds = 0.2
	ts := tools(t, m, s)
	before := pid(t, ts, "srv")
	_, err := call(t, ts["srv__sleep"], `{"ms":60000}`)
	if msg := toolError(t, err, tool.KindTimeout); !strings.Contains(msg, "mcp server srv") {
		t.Fatalf("timeout message = %q", msg)
	}
	// The server is still there and answers.
	if after := pid(t, ts, "srv"); after != before {
		t.Fatalf("pid changed after a timeout: %s → %s", before, after)
	}
	mustCall(t, ts["srv__sleep"], `{"ms":1}`)
}

func TestIdleServersStop(t *testing.T) {
	t.Parallel()
	m := newManager(t, mcp.Config{IdleTimeout: time.Nanosecond})
	a := tools(t, m, spec("a"))
	first := pid(t, a, "a")
	// Listing another server sweeps a, idle since its last call.
	tools(t, m, spec("b"))
	n := 0
	for alive(first) {
		if n++; n > 500 {
			t.Fatalf("idle server %s still running", first)
		}
		waitABit()
	}
	// a's tools still work: the server starts again, and is managed.
	if again := pid(t, a, "a"); again == first {
		t.Fatal("same pid after the idle stop")
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	m, err := mcp.NewManager(mcp.Config{AllowCommands: []string{serverBin}, TerminateTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ts := tools(t, m, spec("srv"), spec("two"))
	p1, p2 := pid(t, ts, "srv"), pid(t, ts, "two")
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if alive(p1) || alive(p2) {
		t.Fatalf("servers %s, %s survive Close", p1, p2)
	}
	_, err = call(t, ts["srv__echo"], `{"text":"x"}`)
	if msg := toolError(t, err, tool.KindExecution); !strings.Contains(msg, mcp.ErrClosed.Error()) {
		t.Fatalf("call after Close: %q", msg)
	}
	if _, err := m.Tools(context.Background(), []agent.MCPServer{spec("srv")}); !errors.Is(err, mcp.ErrClosed) {
		t.Fatalf("Tools after Close: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestToolName(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 80)
	for _, tc := range []struct{ server, name, want string }{
		{"files", "read", "files__read"},
		{"files", "read.file/v2", "files__read_file_v2"},
		{"files", "ünï", "files___n_"},
		{"f", long, "f__" + strings.Repeat("x", 50) + "_" + "c3b3f5d1"},
	} {
		got := mcp.ToolName(tc.server, tc.name)
		if len(got) > 64 {
			t.Fatalf("ToolName(%q, %q) is %d bytes", tc.server, tc.name, len(got))
		}
		if tc.name != long && got != tc.want {
			t.Errorf("ToolName(%q, %q) = %q, want %q", tc.server, tc.name, got, tc.want)
		}
	}
	a, b := mcp.ToolName("f", long+"a"), mcp.ToolName("f", long+"b")
	if a == b || len(a) != 64 || !strings.HasPrefix(a, "f__xxx") {
		t.Fatalf("long names %q, %q", a, b)
	}
}

// alive reports whether the process runs (a zombie does not).
func alive(pid string) bool {
	var n int
	if _, err := fmt.Sscan(pid, &n); err != nil {
		return false
	}
	if syscall.Kill(n, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n))
	if err != nil {
		return !os.IsNotExist(err)
	}
	// The state follows the command name in parentheses.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func TestCloseKillsProcessGroup(t *testing.T) {
	t.Parallel()
	m, err := mcp.NewManager(mcp.Config{AllowCommands: []string{serverBin}, Env: mcp.HostEnv(os.Getenv), TerminateTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ts := tools(t, m, spec("srv"))
	var r struct{ Text string }
	if err := json.Unmarshal([]byte(mustCall(t, ts["srv__spawn"], `{}`)), &r); err != nil {
		t.Fatal(err)
	}
	if !alive(r.Text) {
		t.Fatalf("child %s not running", r.Text)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for n := 0; alive(r.Text); n++ {
		if n > 500 {
			t.Fatalf("the server's child %s survives Close", r.Text)
		}
		waitABit()
	}
}

func TestToolListChanged(t *testing.T) {
	t.Parallel()
	m := newManager(t, mcp.Config{})
	ts := tools(t, m, spec("srv"))
	if _, ok := ts["srv__grown"]; ok {
		t.Fatal("grown listed before it exists")
	}
	mustCall(t, ts["srv__grow"], `{}`)
	// The server notifies the client; the next listing has the new tool.
	for n := 0; ; n++ {
		ts = tools(t, m, spec("srv"))
		if g, ok := ts["srv__grown"]; ok {
			if got := mustCall(t, g, `{}`); got != `{"text":"grown"}` {
				t.Fatalf("grown = %s", got)
			}
			return
		}
		if n > 500 {
			t.Fatal("the tool list was never refreshed")
		}
		waitABit()
	}
}

// waitABit yields between polls of a condition with a deadline.
func waitABit() { <-time.After(10 * time.Millisecond) }
