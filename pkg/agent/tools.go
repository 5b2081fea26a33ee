package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/tool"
)

// Tool result limits.
const (
	// MaxToolResultBytes caps a tool_result body. A larger body is replaced
	// by {"truncated":true,"original_bytes":n,"content":"<first bytes>"}.
	MaxToolResultBytes = 48000
	// maxArgsDetail caps the raw arguments echoed in an
	// invalid_tool_arguments body.
	maxArgsDetail = 2000
	// maxEventArgs caps the arguments a tool.call event carries.
	maxEventArgs = 4096
	// DefaultToolTimeout bounds one tool call unless
	// limits.tool_timeout_seconds says otherwise.
	DefaultToolTimeout = 2 * time.Minute
)

// call is one tool call that passed the pre-checks.
type call struct {
	i    int
	id   string
	t    tool.Tool
	args json.RawMessage
}

// runTools runs one round's tool calls and returns one tool result per
// call, in the model's order. Pre-checks, in OpenRath's order: arguments
// that are not a JSON object → invalid_tool_arguments; a name the agent
// does not offer → unknown_tool; arguments that do not match the tool's
// schema → invalid_tool_arguments; then the tool policy (command_deny and
// max_calls, see [ToolPolicy]) → policy_denied; a ResourceKey that panics →
// tool_execution_exception. Calls that pass are grouped by resource key:
// each group runs in order on its own goroutine, groups run concurrently.
//
// With a journal (Meta.Journal), a call whose result an earlier delivery
// recorded is not run again (see [Journal] for the exceptions); each call
// that runs records its start before and its result after; a started call
// without a result to a tool not declared idempotent returns an
// [*AmbiguousError] before anything in the round runs; a failure to record
// returns an error once the round's calls have ended. The policy admits a
// recorded call as it did when it ran, so its counts hold across a resume.
func (a *Agent) runTools(ctx context.Context, round int, calls []session.ToolCall, m Meta, pol *policyState) ([]session.ToolResult, error) {
	bodies := make([]string, len(calls))
	groups := map[string][]call{}
	var order []string
	for i, c := range calls {
		a.emit(m, Event{Type: "tool.call", Round: round, CallID: c.ID, Name: c.Function.Name, Arguments: cutString(c.Function.Arguments, maxEventArgs)})
		args, err := tool.DecodeArgs(c.Function.Arguments)
		if err != nil {
			bodies[i] = errorBody(&tool.Error{Kind: tool.KindInvalidArguments, Message: err.Error(),
				Detail: cutString(c.Function.Arguments, maxArgsDetail)})
			continue
		}
		t, ok := a.Tools.Get(c.Function.Name)
		if !ok {
			bodies[i] = errorBody(&tool.Error{Kind: tool.KindUnknownTool,
				Message: fmt.Sprintf("no tool named %q; available: %v", c.Function.Name, names(a.Tools))})
			continue
		}
		if err := a.Tools.Validate(c.Function.Name, args); err != nil {
			bodies[i] = errorBody(&tool.Error{Kind: tool.KindInvalidArguments, Message: err.Error(),
				Detail: cutString(c.Function.Arguments, maxArgsDetail)})
			continue
		}
		if e := pol.admit(a.Spec.Policy, c.Function.Name, args); e != nil {
			bodies[i] = errorBody(e)
			continue
		}
		if body, ok := m.rp.recorded(round, c.ID, t); ok {
			bodies[i] = body
			continue
		}
		if err := m.rp.ambiguous(round, c.ID, t, c.Function.Arguments); err != nil {
			body, again, ok, rerr := m.rp.reviewed(round, c.ID, t)
			switch {
			case !ok:
				return nil, err
			case rerr != nil:
				return nil, rerr
			case !again:
				bodies[i] = body
				m.rp.end(ctx, round, c.ID, body)
				continue
			}
		}
		raw := json.RawMessage(c.Function.Arguments)
		key, err := resourceKey(t, raw)
		if err != nil {
			bodies[i] = errorBody(&tool.Error{Kind: tool.KindExecution, Message: err.Error()})
			continue
		}
		if _, seen := groups[key]; !seen {
			order = append(order, key)
		}
		groups[key] = append(groups[key], call{i: i, id: c.ID, t: t, args: raw})
	}
	env := tool.Env{Sandbox: m.Sandbox}
	timeout := a.Spec.Limits.toolTimeout()
	runGroup := func(key string) {
		for _, c := range groups[key] {
			if !m.rp.begin(ctx, round, c.id, c.t.Def().Name, c.args) {
				return // the step fails: an unrecorded start must not run
			}
			m.rp.running(c.t)
			bodies[c.i] = callTool(tool.WithCallID(ctx, c.id), c.t, env, c.args, timeout)
			m.rp.end(ctx, round, c.id, bodies[c.i])
		}
	}
	if len(order) == 1 {
		runGroup(order[0]) // nothing to overlap with
	} else {
		var wg sync.WaitGroup
		for _, key := range order {
			wg.Go(func() { runGroup(key) })
		}
		wg.Wait()
	}
	if err := m.rp.failed(); err != nil {
		return nil, fmt.Errorf("agent %s: %w", a.Spec.Name, err)
	}
	out := make([]session.ToolResult, len(calls))
	for i, c := range calls {
		ev := Event{Type: "tool.result", Round: round, CallID: c.ID, Name: c.Function.Name, OK: true}
		if kind := failureKind(bodies[i]); kind != "" {
			ev.OK, ev.ErrorKind = false, kind
		}
		a.emit(m, ev)
		out[i] = session.ToolResult{ToolCallID: c.ID, Name: c.Function.Name, Content: bodies[i]}
	}
	return out, nil
}

func (a *Agent) emit(m Meta, e Event) {
	if m.OnEvent != nil {
		m.OnEvent(e)
	}
}

func names(s *tool.Set) []string {
	var out []string
	for _, d := range s.Defs() {
		out = append(out, d.Name)
	}
	if out == nil {
		out = []string{}
	}
	return out
}

func resourceKey(t tool.Tool, args json.RawMessage) (key string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("resource key panicked: %v", p)
		}
	}()
	return t.ResourceKey(args), nil
}

// callTool runs one call under its timeout and returns its tool_result
// body. A panic becomes tool_execution_exception. A tool that ignores its
// context is abandoned when the timeout passes: the step goes on with a
// timeout body while the call's goroutine finishes in the background.
func callTool(ctx context.Context, t tool.Tool, env tool.Env, args json.RawMessage, timeout time.Duration) string {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type outcome struct {
		v   any
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- outcome{err: &tool.Error{Kind: tool.KindExecution, Message: fmt.Sprintf("panic: %v", p)}}
			}
		}()
		v, err := t.Call(ctx, env, args)
		done <- outcome{v: v, err: err}
	}()
	var o outcome
	select {
	case o = <-done:
	case <-ctx.Done():
		o = outcome{err: ctx.Err()}
	}
	if o.err != nil {
		var te *tool.Error
		switch {
		case errors.As(o.err, &te):
			return errorBody(te)
		case errors.Is(o.err, context.DeadlineExceeded) && errors.Is(ctx.Err(), context.DeadlineExceeded):
			return errorBody(&tool.Error{Kind: tool.KindTimeout, Message: fmt.Sprintf("the tool did not finish within %s", timeout)})
		default:
			return errorBody(&tool.Error{Kind: tool.KindExecution, Message: o.err.Error(), Detail: fmt.Sprintf("%T", o.err)})
		}
	}
	return resultBody(o.v)
}

// errorBody is OpenRath's failure body.
func errorBody(e *tool.Error) string {
	body := map[string]any{"ok": false, "error_kind": e.Kind, "message": e.Message}
	if e.Detail != nil {
		body["detail"] = e.Detail
	}
	b, err := json.Marshal(body)
	if err != nil {
		b, _ = json.Marshal(map[string]any{"ok": false, "error_kind": e.Kind, "message": e.Message})
	}
	return capBody(string(b))
}

// failureKind returns a body's error_kind when it is a failure body.
func failureKind(body string) string {
	var f struct {
		OK        *bool  `json:"ok"`
		ErrorKind string `json:"error_kind"`
	}
	if json.Unmarshal([]byte(body), &f) == nil && f.OK != nil && !*f.OK && f.ErrorKind != "" {
		return f.ErrorKind
	}
	return ""
}

// resultBody encodes a tool's return value as OpenRath's loop does: a bool
// becomes {"ok":b}, raw JSON is kept, anything else is marshaled (a string
// becomes a JSON string); a value that does not marshal becomes
// {"repr","type"}.
func resultBody(v any) string {
	var b []byte
	var err error
	switch x := v.(type) {
	case bool:
		b, err = json.Marshal(map[string]bool{"ok": x})
	case json.RawMessage:
		if json.Valid(x) {
			b = x
		} else {
			b, err = json.Marshal(string(x))
		}
	default:
		b, err = json.Marshal(v)
	}
	if err != nil {
		b, _ = json.Marshal(map[string]string{"repr": fmt.Sprintf("%+v", v), "type": fmt.Sprintf("%T", v)})
	}
	return capBody(string(b))
}

// capBody replaces a body over MaxToolResultBytes with a truncation marker
// holding its first bytes.
func capBody(body string) string {
	if len(body) <= MaxToolResultBytes {
		return body
	}
	// Escaping can grow the kept text, so shrink it until the marker fits.
	n := MaxToolResultBytes - 200
	for {
		b, _ := json.Marshal(map[string]any{"truncated": true, "original_bytes": len(body), "content": cutBytes(body, n)})
		if len(b) <= MaxToolResultBytes || n == 0 {
			return string(b)
		}
		n = max(n*MaxToolResultBytes/len(b)-200, 0)
	}
}

// cutBytes returns at most n bytes of s, not splitting a character.
func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func cutString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return cutBytes(s, n) + "...(truncated)"
}
