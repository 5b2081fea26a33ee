package agent

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rath-run/rath/pkg/agent/internal/cmdmatch"
	"github.com/rath-run/rath/pkg/tool"
	"github.com/rath-run/rath/pkg/tool/builtin"
)

// ToolPolicy limits what the agent's tools may do (OpenRath 1.3's
// ToolPolicy), enforced where tools dispatch, outside the model:
//
//	policy:
//	  max_calls:
//	    "*": 20                 # all tool calls of one step together
//	    run_shell_command: 5    # one tool's calls in one step
//	  command_deny: [rm, git push, curl]
//
// A call over a limit, or a command a pattern refuses, is not run: the
// model gets an error body of kind policy_denied naming the limit or the
// pattern, and the step goes on. max_calls counts the calls that ran in
// the step (the calls the policy or a pre-check refused do not count), in
// the model's order. command_deny applies to run_shell_command's cmd and
// run_code's program; its matching semantics are package cmdmatch's
// (docs/tools.md, "Tool policy"). The policy is checked when a call would
// run: after its approval, if it needs one. Together with approve, it is
// validated when the spec is parsed, so a bad policy fails at submit.
type ToolPolicy struct {
	// MaxCalls maps a tool name, or "*" for all tools together, to the
	// most calls one step may run.
	MaxCalls map[string]int `json:"max_calls,omitempty"`
	// CommandDeny lists patterns of commands the shell tools refuse.
	CommandDeny []string `json:"command_deny,omitempty"`
}

// Limits on a policy.
const (
	MaxDenyPatterns = 64
	maxCallsLimit   = 1_000_000
)

// KindPolicyDenied is the error kind of a call the tool policy refused.
const KindPolicyDenied = "policy_denied"

// validate names the first bad field under policy; s is the whole spec,
// whose tools and mcp the max_calls keys must name.
func (p ToolPolicy) validate(s *Spec) error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: policy.%s: %s", ErrInvalidSpec, field, fmt.Sprintf(format, args...))
	}
	keys := make([]string, 0, len(p.MaxCalls))
	for k := range p.MaxCalls {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		n := p.MaxCalls[k]
		switch {
		case strings.TrimSpace(k) == "":
			return bad("max_calls", "empty tool name (use \"*\" for all tools)")
		case n < 1 || n > maxCallsLimit:
			return bad("max_calls."+k, "must be in 1..%d, got %d (leave a tool out of tools to forbid it)", maxCallsLimit, n)
		case !s.mayOffer(k):
			return bad("max_calls."+k, "the agent offers no tool %q (tools: %v); a limit on it would never apply", k, s.Tools)
		}
	}
	if len(p.CommandDeny) > MaxDenyPatterns {
		return bad("command_deny", "%d patterns, limit %d", len(p.CommandDeny), MaxDenyPatterns)
	}
	for i, s := range p.CommandDeny {
		if _, err := cmdmatch.ParsePattern(s); err != nil {
			return bad(fmt.Sprintf("command_deny[%d]", i), "%q: %v", s, err)
		}
	}
	return nil
}

// patterns returns the parsed command_deny list (validated already).
func (p ToolPolicy) patterns() []cmdmatch.Pattern {
	var out []cmdmatch.Pattern
	for _, s := range p.CommandDeny {
		if pp, err := cmdmatch.ParsePattern(s); err == nil {
			out = append(out, pp)
		}
	}
	return out
}

// policyState counts one step's calls that ran.
type policyState struct {
	calls map[string]int
	total int
	deny  []cmdmatch.Pattern
}

// policyState returns the step's policy counters, made on first use.
func (r *Result) policyState(a *Agent) *policyState {
	if r.policy == nil {
		r.policy = &policyState{calls: map[string]int{}, deny: a.Spec.Policy.patterns()}
	}
	return r.policy
}

// admit decides whether a call that passed the pre-checks may run. It
// returns nil and counts the call, or the error the model gets.
func (p *policyState) admit(pol ToolPolicy, name string, args any) *tool.Error {
	if len(p.deny) > 0 {
		if d := checkCommand(name, args, p.deny); d != nil {
			msg := fmt.Sprintf("not run: policy.command_deny pattern %q matches %q", d.Pattern, d.Command)
			if d.Pattern == "" {
				msg = fmt.Sprintf("not run: policy.command_deny is set and the command cannot be checked against it: %s (in %q)", d.Reason, d.Command)
			}
			return &tool.Error{Kind: KindPolicyDenied, Message: msg}
		}
	}
	if n, ok := pol.MaxCalls[name]; ok && p.calls[name] >= n {
		return &tool.Error{Kind: KindPolicyDenied,
			Message: fmt.Sprintf("not run: policy.max_calls.%s is %d and this step has run %d calls to %s", name, n, p.calls[name], name)}
	}
	if n, ok := pol.MaxCalls["*"]; ok && p.total >= n {
		return &tool.Error{Kind: KindPolicyDenied,
			Message: fmt.Sprintf("not run: policy.max_calls.* is %d and this step has run %d tool calls", n, p.total)}
	}
	p.calls[name]++
	p.total++
	return nil
}

// checkCommand applies the deny patterns to the shell tools' programs.
func checkCommand(name string, raw any, deny []cmdmatch.Pattern) *cmdmatch.Denial {
	args, _ := raw.(map[string]any)
	switch name {
	case builtin.RunShellCommand:
		cmd, _ := args["cmd"].(string)
		return cmdmatch.Check(cmd, deny)
	case builtin.RunCode:
		code, _ := args["code"].(string)
		lang, _ := args["language"].(string)
		switch strings.ToLower(strings.TrimSpace(lang)) {
		case "sh", "bash":
			return cmdmatch.Check(code, deny)
		default:
			return cmdmatch.CheckText(code, deny)
		}
	}
	return nil
}

// mayOffer reports whether the spec can offer a tool named name: "*", a
// name in tools, a built-in with the builtin group, or an MCP server's
// tool. With a name in tools that is neither a built-in nor builtin (a
// custom tool or group, known only to the worker) every name may be.
func (s *Spec) mayOffer(name string) bool {
	if name == "*" {
		return true
	}
	for _, t := range s.Tools {
		switch {
		case t == name:
			return true
		case t == builtin.Group:
			if slices.Contains(builtin.Names(), name) {
				return true
			}
		case !slices.Contains(builtin.Names(), t):
			return true // a custom tool or group: the worker knows
		}
	}
	for _, m := range s.MCP {
		if strings.HasPrefix(name, m.Name+"__") {
			return true
		}
	}
	return false
}
