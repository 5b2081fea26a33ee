package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
)

func TestParseSpecPolicy(t *testing.T) {
	t.Parallel()
	s, err := agent.ParseSpec([]byte(`
name: a
model: m
tools: [builtin]
approve: [write_workspace_file]
policy:
  max_calls: {"*": 10, run_shell_command: 2}
  command_deny: [rm, git push]
`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Policy.MaxCalls["*"] != 10 || s.Policy.MaxCalls["run_shell_command"] != 2 || !slices.Equal(s.Policy.CommandDeny, []string{"rm", "git push"}) {
		t.Fatalf("policy = %+v", s.Policy)
	}
	for _, tc := range []struct{ name, policy, want string }{
		{"zero", `{max_calls: {run_code: 0}}`, "policy.max_calls.run_code: must be in 1..1000000, got 0"},
		{"negative", `{max_calls: {"*": -1}}`, "policy.max_calls.*: must be in"},
		{"empty tool", `{max_calls: {"": 1}}`, "policy.max_calls: empty tool name"},
		{"empty pattern", `{command_deny: [rm, " "]}`, "policy.command_deny[1]"},
		{"path pattern", `{command_deny: [/bin/rm]}`, `policy.command_deny[0]: "/bin/rm"`},
		{"shell syntax", `{command_deny: ["rm;"]}`, "policy.command_deny[0]"},
		{"unknown field", `{max_call: {x: 1}}`, `unknown field "max_call"`},
		{"not a number", `{max_calls: {x: many}}`, "max_calls"},
		{"tool not offered", `{max_calls: {run_shel_command: 2}}`, `policy.max_calls.run_shel_command: the agent offers no tool "run_shel_command"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := agent.ParseSpec([]byte("name: a\nmodel: m\ntools: [builtin]\npolicy: " + tc.policy + "\n"))
			if !errors.Is(err, agent.ErrInvalidSpec) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestPolicyMaxCalls: per-tool and per-step limits hold across rounds,
// refused calls do not count, and the model is told which limit.
func TestPolicyMaxCalls(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	ran := map[string]int{}
	counter := func(name string) *funcTool {
		return &funcTool{name: name, key: byArg, call: func(context.Context, json.RawMessage) (any, error) {
			mu.Lock()
			defer mu.Unlock()
			ran[name]++
			return "ok", nil
		}}
	}
	a := newAgent(t, []llm.ScriptReply{
		{ToolCalls: []session.ToolCall{call("1", "t", `{"x":"a"}`), call("2", "t", `{"x":"b"}`), call("3", "t", `{"x":"c"}`), call("4", "u", `{"x":"d"}`)}},
		{ToolCalls: []session.ToolCall{call("5", "u", `{"x":"e"}`), call("6", "t", `{"x":"f"}`), call("7", "t", `{"x":"g"`)}},
		{Content: "done"},
	}, counter("t"), counter("u"))
	a.Spec.Policy = agent.ToolPolicy{MaxCalls: map[string]int{"t": 2, "*": 3}}
	out, err := a.Forward(context.Background(), userSession(t, "go"))
	if err != nil {
		t.Fatal(err)
	}
	if ran["t"] != 2 || ran["u"] != 1 {
		t.Fatalf("ran %v, want t 2 and u 1", ran)
	}
	bodies := results(t, out.Version().Chunks)
	if len(bodies) != 7 {
		t.Fatalf("%d results, want 7", len(bodies))
	}
	want := []string{"", "", "policy.max_calls.t is 2", "", "policy.max_calls.* is 3", "policy.max_calls.t is 2", ""}
	for i, w := range want {
		msg, _ := bodies[i]["message"].(string)
		switch {
		case w == "" && i == 6:
			if bodies[i]["error_kind"] != "invalid_tool_arguments" {
				t.Errorf("result 7 = %v, want invalid_tool_arguments (a bad call is refused before the policy)", bodies[i])
			}
		case w == "":
			if bodies[i]["error_kind"] != nil {
				t.Errorf("result %d = %v, want it run", i+1, bodies[i])
			}
		case bodies[i]["error_kind"] != agent.KindPolicyDenied || !strings.Contains(msg, w):
			t.Errorf("result %d = %v, want policy_denied naming %q", i+1, bodies[i], w)
		}
	}
}

// TestPolicyCommandDeny: a refused command never reaches the tool.
func TestPolicyCommandDeny(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var ran []string
	shell := &funcTool{name: "run_shell_command", schema: `{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"]}`,
		key: func(json.RawMessage) string { return "exec" },
		call: func(_ context.Context, args json.RawMessage) (any, error) {
			var a struct{ Cmd string }
			_ = json.Unmarshal(args, &a)
			mu.Lock()
			defer mu.Unlock()
			ran = append(ran, a.Cmd)
			return "ok", nil
		}}
	code := &funcTool{name: "run_code", schema: `{"type":"object","properties":{"code":{"type":"string"},"language":{"type":"string"}},"required":["code"]}`,
		call: func(_ context.Context, args json.RawMessage) (any, error) {
			mu.Lock()
			defer mu.Unlock()
			ran = append(ran, string(args))
			return "ok", nil
		}}
	cmds := []string{"echo hi", `sh -c 'r""m -rf x'`, "$X y", "sudo rm x", "ls"}
	var calls []session.ToolCall
	for i, c := range cmds {
		b, _ := json.Marshal(map[string]string{"cmd": c})
		calls = append(calls, call(string(rune('a'+i)), "run_shell_command", string(b)))
	}
	calls = append(calls, call("py", "run_code", `{"code":"import os\nos.system('rm -rf x')"}`),
		call("sh", "run_code", `{"code":"echo ok\nr\\m x","language":"sh"}`))
	a := newAgent(t, []llm.ScriptReply{{ToolCalls: calls}, {Content: "done"}}, shell, code)
	a.Spec.Policy = agent.ToolPolicy{CommandDeny: []string{"rm"}}
	out, err := a.Forward(context.Background(), userSession(t, "go"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ran, []string{"echo hi", "ls"}) {
		t.Fatalf("ran %q, want only echo hi and ls", ran)
	}
	bodies := results(t, out.Version().Chunks)
	for i, want := range []string{"", `pattern "rm"`, "computed", `pattern "rm"`, "", `pattern "rm"`, `pattern "rm"`} {
		msg, _ := bodies[i]["message"].(string)
		if want == "" {
			continue
		}
		if bodies[i]["error_kind"] != agent.KindPolicyDenied || !strings.Contains(msg, want) || !strings.Contains(msg, "policy.command_deny") {
			t.Errorf("result %d = %v, want policy_denied with %q", i+1, bodies[i], want)
		}
	}
}
