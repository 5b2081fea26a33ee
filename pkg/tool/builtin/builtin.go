// Package builtin provides OpenRath's six built-in tools, with OpenRath's
// names, argument schemas, resource keys and result shapes, running through
// the step's [sandbox.Sandbox]:
//
//	run_shell_command      {cmd}                      key "exec"
//	read_workspace_file    {path, encoding?}          key "fs:read:<path>"
//	write_workspace_file   {path, content}            key "fs:write:<path>"
//	list_workspace_files   {path}                     key "fs:list:<path>"
//	workspace_path_exists  {path}                     key "fs:stat:<path>"
//	run_code               {code, language?, timeout?} key "code"
//
// Results (the tool_result body):
//
//	run_shell_command   {"exit_code","stdout","stderr","elapsed_ms"} (+ stdout_truncated, stderr_truncated)
//	read_workspace_file {"data"} (text over 12,000 characters is cut and ends "...(truncated)")
//	write_workspace_file {"bytes_written"}
//	list_workspace_files {"entries":[{"name","path","is_dir"}]} (first 500; "truncated":true beyond)
//	workspace_path_exists {"ok": bool}
//	run_code            {"text":null,"stdout","stderr","error"} (error is stderr when the exit code is not 0)
//
// Failures are [*tool.Error] values with OpenRath's kinds: no_sandbox when
// the step has none, file_not_found, path_outside_workspace, timeout,
// sandbox_closed, unsupported_tool, output_truncated (a file too large to
// read), os_error for anything else the sandbox reports.
//
// Side effects and idempotency (tool.Def.ReadOnly, tool.Def.Idempotent):
// read_workspace_file, list_workspace_files and workspace_path_exists have
// none (read-only); write_workspace_file, run_shell_command and run_code
// change only the workspace, so they are declared idempotent: a step
// resumed after a crash restores the workspace of its last recorded round
// first (package worker), and a sandbox without network reaches nothing
// else. run_shell_command and run_code also declare tool.Def.Network: in a
// sandbox with network (egress, or the local backend) a command may reach
// the world, so there they are not idempotent and a call a crash left
// ambiguous waits for a review (package agent); see docs/RELIABILITY.md.
// write_workspace_file writes one file whatever the network.
package builtin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rath-run/rath/pkg/sandbox"
	"github.com/rath-run/rath/pkg/tool"
)

// Group is the name that selects all six tools in an agent spec.
const Group = "builtin"

// Limits, as OpenRath sets them where it does.
const (
	// MaxCommandLen bounds run_shell_command's cmd.
	MaxCommandLen = 2048
	// MaxFileChars is where read_workspace_file cuts text.
	MaxFileChars = 12000
	// MaxReadBytes is the largest file read_workspace_file reads.
	MaxReadBytes = 1 << 20
	// MaxEntries bounds list_workspace_files.
	MaxEntries = 500
	// MaxOutputBytes caps a command's stdout and stderr each.
	MaxOutputBytes = 32 << 10
	// MaxCodeBytes bounds run_code's code.
	MaxCodeBytes = 256 << 10
)

// Tool names.
const (
	RunShellCommand     = "run_shell_command"
	ReadWorkspaceFile   = "read_workspace_file"
	WriteWorkspaceFile  = "write_workspace_file"
	ListWorkspaceFiles  = "list_workspace_files"
	WorkspacePathExists = "workspace_path_exists"
	RunCode             = "run_code"
)

// Names lists the six tools, sorted.
func Names() []string {
	return []string{ListWorkspaceFiles, ReadWorkspaceFile, RunCode, RunShellCommand, WorkspacePathExists, WriteWorkspaceFile}
}

// Tools returns the six tools.
func Tools() []tool.Tool {
	return []tool.Tool{shellTool{}, readTool{}, writeTool{}, listTool{}, existsTool{}, codeTool{}}
}

// Register adds the six tools and the "builtin" group to r.
func Register(r *tool.Registry) error {
	if err := r.Register(Tools()...); err != nil {
		return err
	}
	return r.RegisterGroup(Group, Names()...)
}

// NewRegistry returns a registry holding the built-ins and their group.
func NewRegistry() *tool.Registry {
	r := &tool.Registry{}
	if err := Register(r); err != nil {
		panic(err) // the built-ins' names are fixed and valid
	}
	return r
}

func sb(env tool.Env) (sandbox.Sandbox, error) {
	if env.Sandbox == nil {
		return nil, &tool.Error{Kind: tool.KindNoSandbox, Message: "this step has no sandbox: the worker was started without sandbox backends"}
	}
	return env.Sandbox, nil
}

// sandboxError maps a sandbox error to an OpenRath error kind.
func sandboxError(ctx context.Context, path string, err error) error {
	var te *tool.Error
	switch {
	case errors.As(err, &te):
		return te
	case errors.Is(err, sandbox.ErrNotFound):
		return &tool.Error{Kind: tool.KindFileNotFound, Message: err.Error(), Detail: path}
	case errors.Is(err, sandbox.ErrOutsideWorkspace):
		return &tool.Error{Kind: tool.KindOutsideWorkspace, Message: err.Error(), Detail: path}
	case errors.Is(err, sandbox.ErrClosed):
		return &tool.Error{Kind: tool.KindSandboxClosed, Message: err.Error()}
	case errors.Is(err, sandbox.ErrUnsupported):
		return &tool.Error{Kind: tool.KindUnsupported, Message: err.Error()}
	case errors.Is(err, sandbox.ErrTooLarge):
		return &tool.Error{Kind: tool.KindOutputTruncated, Message: err.Error(), Detail: path}
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
		return &tool.Error{Kind: tool.KindTimeout, Message: err.Error()}
	default:
		return &tool.Error{Kind: tool.KindOSError, Message: err.Error()}
	}
}

func decode(args json.RawMessage, v any) error {
	if err := json.Unmarshal(args, v); err != nil {
		return &tool.Error{Kind: tool.KindInvalidArguments, Message: err.Error()}
	}
	return nil
}

// pathArgs is the argument of the four path tools.
type pathArgs struct {
	Path string `json:"path"`
}

func pathKey(prefix string, args json.RawMessage) string {
	var a pathArgs
	_ = json.Unmarshal(args, &a)
	return prefix + a.Path
}

const pathSchema = `{"type":"object","properties":{"path":{"type":"string","description":"Workspace-relative path (\".\" is the workspace root)."}},"required":["path"],"additionalProperties":false}`

// remaining is the time left before ctx's deadline, or 0 (backend default).
func remaining(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), time.Millisecond)
	}
	return 0
}

// ---- run_shell_command

type shellTool struct{}

func (shellTool) Def() tool.Def {
	return tool.Def{
		Name:        RunShellCommand,
		Idempotent:  true, // once the workspace is restored (package doc)
		Network:     true, // and only in a sandbox without network
		Description: "Run a one-line shell command (/bin/sh -c) in the workspace and return its exit code, stdout and stderr.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"cmd":{"type":"string","description":"The command line; no newlines, at most 2048 characters."}},"required":["cmd"],"additionalProperties":false}`),
	}
}

func (shellTool) ResourceKey(json.RawMessage) string { return "exec" }

// CommandResult is run_shell_command's result.
type CommandResult struct {
	ExitCode        int    `json:"exit_code"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	ElapsedMS       int64  `json:"elapsed_ms"`
	StdoutTruncated bool   `json:"stdout_truncated,omitempty"`
	StderrTruncated bool   `json:"stderr_truncated,omitempty"`
}

func (shellTool) Call(ctx context.Context, env tool.Env, args json.RawMessage) (any, error) {
	var a struct {
		Cmd string `json:"cmd"`
	}
	if err := decode(args, &a); err != nil {
		return nil, err
	}
	switch {
	case strings.ContainsAny(a.Cmd, "\r\n"):
		return nil, &tool.Error{Kind: tool.KindInvalidArguments, Message: "multiline commands are rejected"}
	case len(a.Cmd) > MaxCommandLen:
		return nil, &tool.Error{Kind: tool.KindInvalidArguments, Message: fmt.Sprintf("command is %d characters, limit %d", len(a.Cmd), MaxCommandLen)}
	case strings.TrimSpace(a.Cmd) == "":
		return nil, &tool.Error{Kind: tool.KindInvalidArguments, Message: "cmd is empty"}
	}
	s, err := sb(env)
	if err != nil {
		return nil, err
	}
	res, err := s.Exec(ctx, sandbox.ExecRequest{Shell: a.Cmd, Timeout: remaining(ctx), MaxOutput: MaxOutputBytes})
	if err != nil {
		return nil, sandboxError(ctx, "", err)
	}
	out := CommandResult{
		ExitCode: res.ExitCode, Stdout: text(res.Stdout), Stderr: text(res.Stderr),
		ElapsedMS: res.Elapsed.Milliseconds(), StdoutTruncated: res.StdoutTruncated, StderrTruncated: res.StderrTruncated,
	}
	if res.TimedOut {
		return nil, &tool.Error{Kind: tool.KindTimeout, Message: fmt.Sprintf("command timed out after %d ms", out.ElapsedMS), Detail: out}
	}
	return out, nil
}

// text decodes output as UTF-8, replacing invalid bytes.
func text(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// ---- read_workspace_file

type readTool struct{}

func (readTool) Def() tool.Def {
	return tool.Def{
		Name:        ReadWorkspaceFile,
		ReadOnly:    true,
		Idempotent:  true,
		Description: "Read a file from the workspace. Text over 12000 characters is cut.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"Workspace-relative path."},"encoding":{"type":["string","null"],"description":"Text encoding (default utf-8); null returns the bytes base64-encoded."}},"required":["path"],"additionalProperties":false}`),
	}
}

func (readTool) ResourceKey(args json.RawMessage) string { return pathKey("fs:read:", args) }

// FileContent is read_workspace_file's result.
type FileContent struct {
	Data string `json:"data"`
	// Encoding is "base64" when the bytes were asked for.
	Encoding string `json:"encoding,omitempty"`
}

func (readTool) Call(ctx context.Context, env tool.Env, args json.RawMessage) (any, error) {
	var a struct {
		Path     string          `json:"path"`
		Encoding json.RawMessage `json:"encoding"`
	}
	if err := decode(args, &a); err != nil {
		return nil, err
	}
	// encoding: absent means utf-8, null means the bytes.
	asBytes := string(a.Encoding) == "null"
	if len(a.Encoding) > 0 && !asBytes {
		var enc string
		if err := json.Unmarshal(a.Encoding, &enc); err != nil {
			return nil, &tool.Error{Kind: tool.KindInvalidArguments, Message: "encoding must be a string or null"}
		}
		switch strings.ToLower(enc) {
		case "utf-8", "utf8":
		default:
			return nil, &tool.Error{Kind: tool.KindInvalidArguments, Message: fmt.Sprintf("encoding %q is not supported; use utf-8 or null", enc)}
		}
	}
	s, err := sb(env)
	if err != nil {
		return nil, err
	}
	data, err := s.ReadFile(ctx, a.Path, MaxReadBytes)
	if err != nil {
		return nil, sandboxError(ctx, a.Path, err)
	}
	if asBytes {
		return FileContent{Data: base64.StdEncoding.EncodeToString(data), Encoding: "base64"}, nil
	}
	return FileContent{Data: cutText(text(data), MaxFileChars)}, nil
}

// cutText keeps the first n characters of s, marking a cut.
func cutText(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i, count := 0, 0
	for i = range s {
		if count == n {
			break
		}
		count++
	}
	return s[:i] + "...(truncated)"
}

// ---- write_workspace_file

type writeTool struct{}

func (writeTool) Def() tool.Def {
	return tool.Def{
		Name:        WriteWorkspaceFile,
		Idempotent:  true, // once the workspace is restored (package doc)
		Description: "Write a text file in the workspace, creating parent directories; replaces an existing file.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"Workspace-relative path."},"content":{"type":"string","description":"The file's new content."}},"required":["path","content"],"additionalProperties":false}`),
	}
}

func (writeTool) ResourceKey(args json.RawMessage) string { return pathKey("fs:write:", args) }

// FileWriteResult is write_workspace_file's result.
type FileWriteResult struct {
	BytesWritten int `json:"bytes_written"`
}

func (writeTool) Call(ctx context.Context, env tool.Env, args json.RawMessage) (any, error) {
	var a struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	if err := decode(args, &a); err != nil {
		return nil, err
	}
	s, err := sb(env)
	if err != nil {
		return nil, err
	}
	if err := s.WriteFile(ctx, a.Path, []byte(a.Content), 0o644); err != nil {
		return nil, sandboxError(ctx, a.Path, err)
	}
	return FileWriteResult{BytesWritten: len(a.Content)}, nil
}

// ---- list_workspace_files

type listTool struct{}

func (listTool) Def() tool.Def {
	return tool.Def{
		Name:        ListWorkspaceFiles,
		ReadOnly:    true,
		Idempotent:  true,
		Description: "List a workspace directory (not recursive), sorted by name.",
		Parameters:  json.RawMessage(pathSchema),
	}
}

func (listTool) ResourceKey(args json.RawMessage) string { return pathKey("fs:list:", args) }

// FileEntry is one entry of list_workspace_files's result.
type FileEntry struct {
	Name  string `json:"name"`
	Path  string `json:"path"`
	IsDir bool   `json:"is_dir"`
}

// FileEntries is list_workspace_files's result.
type FileEntries struct {
	Entries   []FileEntry `json:"entries"`
	Truncated bool        `json:"truncated,omitempty"`
}

func (listTool) Call(ctx context.Context, env tool.Env, args json.RawMessage) (any, error) {
	var a pathArgs
	if err := decode(args, &a); err != nil {
		return nil, err
	}
	s, err := sb(env)
	if err != nil {
		return nil, err
	}
	infos, err := s.List(ctx, a.Path)
	if err != nil {
		return nil, sandboxError(ctx, a.Path, err)
	}
	out := FileEntries{Entries: make([]FileEntry, 0, min(len(infos), MaxEntries))}
	for i, fi := range infos {
		if i == MaxEntries {
			out.Truncated = true
			break
		}
		out.Entries = append(out.Entries, FileEntry{Name: fi.Name, Path: fi.Path, IsDir: fi.IsDir})
	}
	return out, nil
}

// ---- workspace_path_exists

type existsTool struct{}

func (existsTool) Def() tool.Def {
	return tool.Def{
		Name:        WorkspacePathExists,
		ReadOnly:    true,
		Idempotent:  true,
		Description: "Report whether a path exists in the workspace.",
		Parameters:  json.RawMessage(pathSchema),
	}
}

func (existsTool) ResourceKey(args json.RawMessage) string { return pathKey("fs:stat:", args) }

// Exists is workspace_path_exists's result.
type Exists struct {
	OK bool `json:"ok"`
}

func (existsTool) Call(ctx context.Context, env tool.Env, args json.RawMessage) (any, error) {
	var a pathArgs
	if err := decode(args, &a); err != nil {
		return nil, err
	}
	s, err := sb(env)
	if err != nil {
		return nil, err
	}
	_, err = s.Stat(ctx, a.Path)
	switch {
	case err == nil:
		return Exists{OK: true}, nil
	case errors.Is(err, sandbox.ErrNotFound):
		return Exists{OK: false}, nil
	default:
		return nil, sandboxError(ctx, a.Path, err)
	}
}

// ---- run_code

type codeTool struct{}

// interpreters maps run_code languages to the argv that reads a program from
// stdin.
var interpreters = map[string][]string{
	"python":     {"python3", "-"},
	"bash":       {"bash", "-s"},
	"sh":         {"sh", "-s"},
	"javascript": {"node", "-"},
}

func (codeTool) Def() tool.Def {
	return tool.Def{
		Name:        RunCode,
		Idempotent:  true, // once the workspace is restored (package doc)
		Network:     true, // and only in a sandbox without network
		Description: "Run a program in the workspace and return its stdout and stderr. Languages: python (default), bash, sh, javascript.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"code":{"type":"string","description":"The program's source."},"language":{"type":"string","description":"python (default), bash, sh or javascript."},"timeout":{"type":["number","null"],"description":"Seconds before the program is killed."}},"required":["code"],"additionalProperties":false}`),
	}
}

func (codeTool) ResourceKey(json.RawMessage) string { return "code" }

// CodeResult is run_code's result.
type CodeResult struct {
	Text   *string `json:"text"`
	Stdout string  `json:"stdout"`
	Stderr string  `json:"stderr"`
	Error  *string `json:"error"`
}

func (codeTool) Call(ctx context.Context, env tool.Env, args json.RawMessage) (any, error) {
	var a struct {
		Code     string   `json:"code"`
		Language string   `json:"language"`
		Timeout  *float64 `json:"timeout"`
	}
	if err := decode(args, &a); err != nil {
		return nil, err
	}
	lang := strings.ToLower(strings.TrimSpace(a.Language))
	if lang == "" {
		lang = "python"
	}
	argv, ok := interpreters[lang]
	if !ok {
		return nil, &tool.Error{Kind: tool.KindUnsupported, Message: fmt.Sprintf("language %q is not supported (python, bash, sh, javascript)", a.Language)}
	}
	if len(a.Code) > MaxCodeBytes {
		return nil, &tool.Error{Kind: tool.KindInvalidArguments, Message: fmt.Sprintf("code is %d bytes, limit %d", len(a.Code), MaxCodeBytes)}
	}
	timeout := remaining(ctx)
	if a.Timeout != nil {
		if *a.Timeout <= 0 {
			return nil, &tool.Error{Kind: tool.KindInvalidArguments, Message: "timeout must be positive"}
		}
		t := time.Duration(*a.Timeout * float64(time.Second))
		if timeout == 0 || t < timeout {
			timeout = t
		}
	}
	s, err := sb(env)
	if err != nil {
		return nil, err
	}
	res, err := s.Exec(ctx, sandbox.ExecRequest{Argv: argv, Stdin: []byte(a.Code), Timeout: timeout, MaxOutput: MaxOutputBytes})
	if err != nil {
		return nil, sandboxError(ctx, "", err)
	}
	out := CodeResult{Stdout: text(res.Stdout), Stderr: text(res.Stderr)}
	if res.TimedOut {
		return nil, &tool.Error{Kind: tool.KindTimeout, Message: fmt.Sprintf("%s program timed out after %d ms", lang, res.Elapsed.Milliseconds()), Detail: out}
	}
	if res.ExitCode != 0 {
		e := out.Stderr
		if e == "" {
			e = fmt.Sprintf("exit code %d", res.ExitCode)
		}
		out.Error = &e
	}
	return out, nil
}
