package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rath-run/rath/pkg/sandbox"
	"github.com/rath-run/rath/pkg/tool"
	"github.com/rath-run/rath/pkg/tool/builtin"
)

// memSandbox is a small in-memory sandbox: files in a map, commands
// answered by exec.
type memSandbox struct {
	mu     sync.Mutex
	files  map[string][]byte
	exec   func(req sandbox.ExecRequest) (sandbox.ExecResult, error)
	reqs   []sandbox.ExecRequest
	closed bool
}

func newMem() *memSandbox { return &memSandbox{files: map[string][]byte{}} }

func (m *memSandbox) clean(p string) (string, error) {
	if path.IsAbs(p) || p == ".." || strings.HasPrefix(p, "../") || strings.Contains(p, "/../") {
		return "", fmt.Errorf("%w: %s", sandbox.ErrOutsideWorkspace, p)
	}
	return path.Clean(p), nil
}

func (m *memSandbox) Exec(_ context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	if m.exec == nil {
		return sandbox.ExecResult{}, sandbox.ErrUnsupported
	}
	return m.exec(req)
}

func (m *memSandbox) ReadFile(_ context.Context, p string, limit int64) ([]byte, error) {
	p, err := m.clean(p)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.files[p]
	if !ok {
		return nil, fmt.Errorf("%w: %s", sandbox.ErrNotFound, p)
	}
	if limit > 0 && int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: %s", sandbox.ErrTooLarge, p)
	}
	return b, nil
}

func (m *memSandbox) WriteFile(_ context.Context, p string, data []byte, _ fs.FileMode) error {
	p, err := m.clean(p)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[p] = data
	return nil
}

func (m *memSandbox) List(_ context.Context, dir string) ([]sandbox.FileInfo, error) {
	dir, err := m.clean(dir)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[string]bool{}
	var out []sandbox.FileInfo
	for p := range m.files {
		rel := p
		if dir != "." {
			if !strings.HasPrefix(p, dir+"/") {
				continue
			}
			rel = strings.TrimPrefix(p, dir+"/")
		}
		name, rest, isDir := strings.Cut(rel, "/")
		_ = rest
		if seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, sandbox.FileInfo{Name: name, Path: path.Join(dir, name), IsDir: isDir})
	}
	if len(out) == 0 && dir != "." {
		return nil, fmt.Errorf("%w: %s", sandbox.ErrNotFound, dir)
	}
	slices.SortFunc(out, func(a, b sandbox.FileInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (m *memSandbox) Stat(ctx context.Context, p string) (sandbox.FileInfo, error) {
	p, err := m.clean(p)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	m.mu.Lock()
	_, ok := m.files[p]
	m.mu.Unlock()
	if ok {
		return sandbox.FileInfo{Name: path.Base(p), Path: p}, nil
	}
	if _, err := m.List(ctx, p); err == nil {
		return sandbox.FileInfo{Name: path.Base(p), Path: p, IsDir: true}, nil
	}
	return sandbox.FileInfo{}, fmt.Errorf("%w: %s", sandbox.ErrNotFound, p)
}

func (m *memSandbox) Close(context.Context) error { m.closed = true; return nil }

func get(t *testing.T, name string) tool.Tool {
	t.Helper()
	set, err := builtin.NewRegistry().Select([]string{name})
	if err != nil {
		t.Fatal(err)
	}
	tl, ok := set.Get(name)
	if !ok {
		t.Fatalf("no %s", name)
	}
	return tl
}

// run validates args against the tool's schema, as the loop does, then
// calls it and returns its JSON result or its error kind.
func run(t *testing.T, sb sandbox.Sandbox, name, args string) (string, string) {
	t.Helper()
	set, err := builtin.NewRegistry().Select([]string{builtin.Group})
	if err != nil {
		t.Fatal(err)
	}
	v, err := tool.DecodeArgs(args)
	if err != nil {
		return "", tool.KindInvalidArguments
	}
	if err := set.Validate(name, v); err != nil {
		return "", tool.KindInvalidArguments
	}
	tl, _ := set.Get(name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var env tool.Env
	if sb != nil {
		env.Sandbox = sb
	}
	out, err := tl.Call(ctx, env, json.RawMessage(args))
	if err != nil {
		var te *tool.Error
		if !errors.As(err, &te) {
			t.Fatalf("%s returned a plain error: %v", name, err)
		}
		return te.Message, te.Kind
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), ""
}

func TestDefsAndKeys(t *testing.T) {
	t.Parallel()
	set, err := builtin.NewRegistry().Select([]string{"builtin"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range set.Defs() {
		names = append(names, d.Name)
		var schema map[string]any
		if err := json.Unmarshal(d.Parameters, &schema); err != nil || schema["additionalProperties"] != false || d.Description == "" {
			t.Errorf("%s schema %s", d.Name, d.Parameters)
		}
	}
	if !slices.Equal(names, builtin.Names()) || len(names) != 6 {
		t.Fatalf("names %v", names)
	}
	keys := map[string]string{
		"run_shell_command":     "exec",
		"run_code":              "code",
		"read_workspace_file":   "fs:read:a/b.txt",
		"write_workspace_file":  "fs:write:a/b.txt",
		"list_workspace_files":  "fs:list:a/b.txt",
		"workspace_path_exists": "fs:stat:a/b.txt",
	}
	for name, want := range keys {
		tl, _ := set.Get(name)
		if got := tl.ResourceKey(json.RawMessage(`{"path":"a/b.txt"}`)); got != want {
			t.Errorf("%s key %q, want %q", name, got, want)
		}
	}
}

func TestSelect(t *testing.T) {
	t.Parallel()
	r := builtin.NewRegistry()
	set, err := r.Select([]string{"read_workspace_file", "builtin", "read_workspace_file"})
	if err != nil || set.Len() != 6 {
		t.Fatalf("%v %d", err, set.Len())
	}
	_, err = r.Select([]string{"builtin", "launch_rockets"})
	if !errors.Is(err, tool.ErrUnknownTool) || !strings.Contains(err.Error(), "tools[1]") || !strings.Contains(err.Error(), "launch_rockets") {
		t.Fatalf("err %v", err)
	}
	if err := r.Register(get(t, "run_code")); err == nil {
		t.Fatal("duplicate registration accepted")
	}
	var empty *tool.Registry
	if _, err := empty.Select([]string{"x"}); !errors.Is(err, tool.ErrUnknownTool) {
		t.Fatalf("nil registry: %v", err)
	}
}

func TestFileTools(t *testing.T) {
	t.Parallel()
	fileToolsSuite(t, newMem())
}

// fileToolsSuite runs the file tools against any sandbox with an empty
// workspace.
func fileToolsSuite(t *testing.T, sb sandbox.Sandbox) {
	t.Helper()
	steps := []struct{ name, args, want, kind string }{
		{"write_workspace_file", `{"path":"notes/plan.md","content":"héllo"}`, `{"bytes_written":6}`, ""},
		{"read_workspace_file", `{"path":"notes/plan.md"}`, `{"data":"héllo"}`, ""},
		{"read_workspace_file", `{"path":"notes/plan.md","encoding":null}`, `{"data":"aMOpbGxv","encoding":"base64"}`, ""},
		{"read_workspace_file", `{"path":"notes/plan.md","encoding":"latin-1"}`, "", tool.KindInvalidArguments},
		{"read_workspace_file", `{"path":"missing.txt"}`, "", tool.KindFileNotFound},
		{"read_workspace_file", `{"path":"../etc/passwd"}`, "", tool.KindOutsideWorkspace},
		{"write_workspace_file", `{"path":"/etc/x","content":"x"}`, "", tool.KindOutsideWorkspace},
		{"write_workspace_file", `{"path":"x","content":7}`, "", tool.KindInvalidArguments},
		{"write_workspace_file", `{"path":"x"}`, "", tool.KindInvalidArguments},
		{"workspace_path_exists", `{"path":"notes/plan.md"}`, `{"ok":true}`, ""},
		{"workspace_path_exists", `{"path":"notes/none.md"}`, `{"ok":false}`, ""},
		{"list_workspace_files", `{"path":"."}`, `{"entries":[{"name":"notes","path":"notes","is_dir":true}]}`, ""},
		{"list_workspace_files", `{"path":"notes"}`, `{"entries":[{"name":"plan.md","path":"notes/plan.md","is_dir":false}]}`, ""},
		{"list_workspace_files", `{"path":"nowhere"}`, "", tool.KindFileNotFound},
		{"list_workspace_files", `{}`, "", tool.KindInvalidArguments},
	}
	for i, s := range steps {
		got, kind := run(t, sb, s.name, s.args)
		if kind != s.kind || (s.kind == "" && got != s.want) {
			t.Errorf("step %d %s %s: got %s (kind %q), want %s (kind %q)", i, s.name, s.args, got, kind, s.want, s.kind)
		}
	}
	// Long text is cut at 12,000 characters.
	long := strings.Repeat("é", builtin.MaxFileChars+10)
	if _, kind := run(t, sb, "write_workspace_file", mustJSON(t, map[string]string{"path": "long.txt", "content": long})); kind != "" {
		t.Fatal(kind)
	}
	got, _ := run(t, sb, "read_workspace_file", `{"path":"long.txt"}`)
	var fc builtin.FileContent
	if err := json.Unmarshal([]byte(got), &fc); err != nil {
		t.Fatal(err)
	}
	if want := strings.Repeat("é", builtin.MaxFileChars) + "...(truncated)"; fc.Data != want {
		t.Fatalf("cut to %d bytes", len(fc.Data))
	}
	// Files over the read limit are refused, not read.
	if _, kind := run(t, sb, "write_workspace_file", mustJSON(t, map[string]string{"path": "big.bin", "content": strings.Repeat("x", builtin.MaxReadBytes+1)})); kind != "" {
		t.Fatal(kind)
	}
	if _, kind := run(t, sb, "read_workspace_file", `{"path":"big.bin"}`); kind != tool.KindOutputTruncated {
		t.Fatalf("big file: kind %q", kind)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestShellAndCode(t *testing.T) {
	t.Parallel()
	m := newMem()
	m.exec = func(req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		switch {
		case req.Shell == "sleep 100":
			return sandbox.ExecResult{ExitCode: -1, TimedOut: true, Elapsed: time.Second}, nil
		case req.Shell != "":
			return sandbox.ExecResult{ExitCode: 3, Stdout: []byte("out\xff"), Stderr: []byte("err"), Elapsed: 12 * time.Millisecond, StdoutTruncated: true}, nil
		case req.Argv[0] == "python3" && string(req.Stdin) == "boom":
			return sandbox.ExecResult{ExitCode: 1, Stderr: []byte("Traceback: boom")}, nil
		case req.Argv[0] == "python3":
			return sandbox.ExecResult{Stdout: []byte("42\n")}, nil
		}
		return sandbox.ExecResult{}, sandbox.ErrCommandNotFound
	}
	for i, s := range []struct{ name, args, want, kind string }{
		{"run_shell_command", `{"cmd":"ls -la"}`, "{\"exit_code\":3,\"stdout\":\"out\ufffd\",\"stderr\":\"err\",\"elapsed_ms\":12,\"stdout_truncated\":true}", ""},
		{"run_shell_command", `{"cmd":"ls\nrm -rf /"}`, "", tool.KindInvalidArguments},
		{"run_shell_command", mustJSON(t, map[string]string{"cmd": strings.Repeat("x", 2049)}), "", tool.KindInvalidArguments},
		{"run_shell_command", `{"cmd":"sleep 100"}`, "", tool.KindTimeout},
		{"run_shell_command", `{"command":"ls"}`, "", tool.KindInvalidArguments},
		{"run_code", `{"code":"print(42)"}`, `{"text":null,"stdout":"42\n","stderr":"","error":null}`, ""},
		{"run_code", `{"code":"boom","language":"python"}`, `{"text":null,"stdout":"","stderr":"Traceback: boom","error":"Traceback: boom"}`, ""},
		{"run_code", `{"code":"x","language":"cobol"}`, "", tool.KindUnsupported},
		{"run_code", `{"code":"x","language":"javascript"}`, "", tool.KindOSError},
		{"run_code", `{"code":"x","timeout":-1}`, "", tool.KindInvalidArguments},
	} {
		got, kind := run(t, m, s.name, s.args)
		if kind != s.kind || (s.kind == "" && got != s.want) {
			t.Errorf("case %d %s: got %s (kind %q), want %s (kind %q)", i, s.args, got, kind, s.want, s.kind)
		}
	}
	if r := m.reqs[0]; r.Shell != "ls -la" || r.MaxOutput != builtin.MaxOutputBytes || r.Timeout <= 0 {
		t.Fatalf("shell request %+v", r)
	}
	for _, r := range m.reqs {
		if len(r.Argv) > 0 && r.Argv[0] == "python3" && r.Argv[1] != "-" {
			t.Fatalf("code request %+v", r)
		}
	}
}

func TestNoSandbox(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, args string }{
		{"run_shell_command", `{"cmd":"ls"}`},
		{"read_workspace_file", `{"path":"a"}`},
		{"write_workspace_file", `{"path":"a","content":""}`},
		{"list_workspace_files", `{"path":"."}`},
		{"workspace_path_exists", `{"path":"a"}`},
		{"run_code", `{"code":"1"}`},
	} {
		if _, kind := run(t, nil, c.name, c.args); kind != tool.KindNoSandbox {
			t.Errorf("%s: kind %q", c.name, kind)
		}
	}
}
