package llm_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
)

func scriptedFixture() *llm.Scripted {
	return &llm.Scripted{Replies: []llm.ScriptReply{
		{Content: "Let me look at the workspace.", ToolCalls: []session.ToolCall{
			{Function: session.FunctionCall{Name: "list_workspace_files", Arguments: `{"path": "."}`}},
			{ID: "mine", Function: session.FunctionCall{Name: "read_workspace_file", Arguments: `{"path": "hello.txt"}`}},
		}},
		{Content: "  hello.txt says   héllo ✓\n"},
	}}
}

func TestScriptedDeterministic(t *testing.T) {
	t.Parallel()
	s := scriptedFixture()
	req := llm.Request{Messages: []llm.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "read hello.txt please"}}}
	first, err := s.Chat(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Chat(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Chunk().Equal(again.Chunk()) || first.Usage != again.Usage {
		t.Fatalf("same request, different replies: %v / %v", first, again)
	}
	if first.FinishReason != llm.FinishToolCalls || first.Model != llm.ScriptedModel {
		t.Errorf("finish %q model %q", first.FinishReason, first.Model)
	}
	if first.ToolCalls[0].ID != "call_0_0" || first.ToolCalls[1].ID != "mine" || first.ToolCalls[0].Type != "function" {
		t.Errorf("ids = %+v", first.ToolCalls)
	}
	// prompt: "be brief" (2) + "read hello.txt please" (3); completion:
	// 6 words + names (1 each) + arguments (2 each).
	if want := (session.Usage{PromptTokens: 5, CompletionTokens: 12, TotalTokens: 17}); first.Usage != want {
		t.Errorf("usage = %+v, want %+v", first.Usage, want)
	}
	if _, err := session.NewChunk(session.KindAssistant, first.Chunk().Payload()); err != nil {
		t.Errorf("chunk invalid: %v", err)
	}

	// The next reply is chosen by the assistant messages in the request,
	// whatever else it holds.
	transcript := append([]session.Chunk{session.User("read hello.txt please"), first.Chunk()},
		session.ToolResultChunk(session.ToolResult{ToolCallID: "call_0_0", Name: "list_workspace_files", Content: "{}"}))
	req2 := llm.Request{Messages: llm.MessagesFromChunks(transcript)}
	second, err := s.Chat(t.Context(), req2)
	if err != nil {
		t.Fatal(err)
	}
	if second.Content != "  hello.txt says   héllo ✓\n" || second.FinishReason != llm.FinishStop || second.ToolCalls != nil {
		t.Errorf("second = %+v", second)
	}
	var deltas []string
	streamed, err := s.ChatStream(t.Context(), req2, func(d string) { deltas = append(deltas, d) })
	if err != nil || !streamed.Chunk().Equal(second.Chunk()) || streamed.Usage != second.Usage {
		t.Fatalf("stream differs: %+v %v", streamed, err)
	}
	if strings.Join(deltas, "") != second.Content || len(deltas) != 4 {
		t.Errorf("deltas = %q, want 4 words joining to the content", deltas)
	}

	// Past the end of the script.
	transcript = append(transcript, second.Chunk())
	_, err = s.Chat(t.Context(), llm.Request{Messages: llm.MessagesFromChunks(transcript)})
	if !errors.Is(err, llm.ErrScriptExhausted) || !errors.Is(err, llm.ErrPermanent) || errors.Is(err, llm.ErrTransient) {
		t.Fatalf("err = %v, want ErrScriptExhausted (permanent)", err)
	}
	if !strings.Contains(err.Error(), "2 assistant messages") {
		t.Errorf("err = %v, want it to say why", err)
	}
}

func TestScriptedDelayRespectsContext(t *testing.T) {
	t.Parallel()
	s := &llm.Scripted{Replies: []llm.ScriptReply{{Content: "slow", DelayMS: 60_000}}}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.Chat(ctx, llm.Request{})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, llm.ErrTransient) {
		t.Fatalf("err = %v", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("delay ignored the context")
	}
	fast := &llm.Scripted{Replies: []llm.ScriptReply{{Content: "quick", DelayMS: 20}}}
	start = time.Now()
	if r, err := fast.Chat(t.Context(), llm.Request{}); err != nil || r.Content != "quick" || time.Since(start) < 20*time.Millisecond {
		t.Errorf("delay: %v %v %s", r, err, time.Since(start))
	}
}

func TestScriptedInvalidReplyInCode(t *testing.T) {
	t.Parallel()
	s := &llm.Scripted{Replies: []llm.ScriptReply{{ToolCalls: []session.ToolCall{{ID: "x"}}}}}
	_, err := s.Chat(t.Context(), llm.Request{})
	if !errors.Is(err, llm.ErrPermanent) || !strings.Contains(err.Error(), "entry 0") {
		t.Errorf("err = %v", err)
	}
}

func TestScriptedConcurrent(t *testing.T) {
	t.Parallel()
	s := scriptedFixture()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if _, err := s.ChatStream(t.Context(), llm.Request{}, func(string) {}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadScript(t *testing.T) {
	t.Parallel()
	yml := `
# a tutorial script
- content: Let me look.
  tool_calls:
    - function:
        name: read_workspace_file
        arguments: {path: hello.txt}
    - id: call_x
      type: function
      function: {name: run_shell_command, arguments: '{"cmd": "ls"}'}
- Done, hello.txt says hi.
- content: slow one
  delay_ms: 5
`
	got, err := llm.LoadScript(writeFile(t, "s.yaml", yml))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("replies = %+v", got)
	}
	if a := got[0].ToolCalls[0].Function.Arguments; a != `{"path":"hello.txt"}` {
		t.Errorf("object arguments = %q", a)
	}
	if a := got[0].ToolCalls[1]; a.Function.Arguments != `{"cmd": "ls"}` || a.ID != "call_x" {
		t.Errorf("string arguments = %+v", a)
	}
	if got[1].Content != "Done, hello.txt says hi." || got[2].DelayMS != 5 {
		t.Errorf("replies = %+v", got)
	}
	js, err := llm.LoadScript(writeFile(t, "s.json", `[{"content":"a"},"b",{"tool_calls":[{"function":{"name":"f","arguments":"{}"}}]}]`))
	if err != nil || len(js) != 3 || js[1].Content != "b" || js[2].ToolCalls[0].Function.Name != "f" {
		t.Errorf("json: %+v %v", js, err)
	}
}

func TestLoadScriptErrors(t *testing.T) {
	t.Parallel()
	cases := map[string]struct{ script, want string }{
		"unknown field":     {"- content: a\n- contnet: b\n", `entry 1: json: unknown field "contnet"`},
		"no name":           {"- content: a\n- content: b\n- tool_calls: [{function: {arguments: '{}'}}]\n", "entry 2: tool_calls[0]: function.name is required"},
		"bad type":          {`[{"tool_calls":[{"type":"web","function":{"name":"f"}}]}]`, `entry 0: tool_calls[0]: type "web"`},
		"negative delay":    {"- delay_ms: -1\n", "entry 0: delay_ms -1"},
		"huge delay":        {"- delay_ms: 999999999\n", "entry 0: delay_ms"},
		"jitter over delay": {"- content: a\n  delay_ms: 10\n  delay_jitter_ms: 11\n", "entry 0: delay_jitter_ms 11 is outside 0..delay_ms (10)"},
		"negative jitter":   {"- content: a\n  delay_ms: 10\n  delay_jitter_ms: -1\n", "entry 0: delay_jitter_ms -1"},
		"jitter past limit": {"- content: a\n  delay_ms: 400000\n  delay_jitter_ms: 300000\n", "entry 0: delay_ms 400000 + delay_jitter_ms 300000 is over 600000"},
		"not a list":        {"content: a\n", "must be a list"},
		"empty":             {"", "script is empty"},
		"number entry":      {"- 3\n", "entry 0: a reply must be an object or a string"},
		"not yaml":          {"- [unclosed\n", "not YAML or JSON"},
		"calls not list":    {`[{"tool_calls": 5}]`, "entry 0: json: cannot unmarshal number"},
	}
	for name, c := range cases {
		path := writeFile(t, "s.yaml", c.script)
		_, err := llm.LoadScript(path)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: err = %v, want it to name %s and contain %q", name, err, path, c.want)
		}
	}
	if _, err := llm.LoadScript(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	big := writeFile(t, "big.yaml", "- a\n")
	if err := os.Truncate(big, llm.MaxScriptBytes+1); err != nil { // sparse: cheap
		t.Fatal(err)
	}
	if _, err := llm.LoadScript(big); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("big file: %v", err)
	}
	if _, err := llm.ParseScript(make([]byte, llm.MaxScriptBytes+1)); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("big script: %v", err)
	}
}

// FuzzLoadScript feeds arbitrary files to the script parser LoadScript
// uses: it must never panic, and every script it accepts must answer with
// valid assistant chunks.
func FuzzLoadScript(f *testing.F) {
	for _, seed := range []string{
		"- content: hi\n",
		`[{"content":"a","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}]`,
		"- tool_calls: [{function: {name: f, arguments: {a: [1, 2]}}}]\n  delay_ms: 0\n",
		"- plain string\n- &a {content: x}\n- *a\n",
		"[null]", "{}", "-", "- {tool_calls: null}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		replies, err := llm.ParseScript(data)
		if err != nil {
			return
		}
		for i, r := range replies {
			if r.DelayMS > 0 {
				replies[i].DelayMS = 0 // keep the fuzzer fast
			}
		}
		s := &llm.Scripted{Replies: replies}
		var msgs []llm.Message
		for i := range replies {
			resp, err := s.Chat(context.Background(), llm.Request{Messages: msgs})
			if err != nil {
				t.Fatalf("reply %d of an accepted script: %v", i, err)
			}
			c := resp.Chunk()
			if _, err := session.NewChunk(c.Kind(), c.Payload()); err != nil {
				t.Fatalf("reply %d gives an invalid chunk: %v", i, err)
			}
			msgs = append(msgs, llm.Message{Role: "assistant", Content: resp.Content, ToolCalls: resp.ToolCalls})
		}
		if _, err := s.Chat(context.Background(), llm.Request{Messages: msgs}); !errors.Is(err, llm.ErrScriptExhausted) {
			t.Fatalf("past the end: %v", err)
		}
	})
}
