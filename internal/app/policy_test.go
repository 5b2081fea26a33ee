package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/session"
)

// policySpec: a scripted agent whose shell commands try to create files
// beside marker (outside the workspace, so a run that happened is seen on
// the host) past command_deny, and append to marker more often than
// max_calls allows.
func policySpec(t *testing.T, marker string) string {
	t.Helper()
	dir := filepath.Dir(marker)
	sh := func(id, cmd string) map[string]any {
		args, err := json.Marshal(map[string]string{"cmd": cmd})
		if err != nil {
			t.Fatal(err)
		}
		return map[string]any{"id": id, "function": map[string]any{"name": "run_shell_command", "arguments": json.RawMessage(args)}}
	}
	spec := map[string]any{
		"name": "policed", "model": "scripted", "tools": []string{"builtin"},
		"policy": map[string]any{
			"max_calls":    map[string]int{"run_shell_command": 3},
			"command_deny": []string{"touch", "rm"},
		},
		"script": []any{
			map[string]any{"content": "Trying.", "tool_calls": []any{
				sh("s1", "echo ran >> "+marker),
				sh("s2", fmt.Sprintf(`sh -c 'tou""ch %s/denied1'`, dir)),
				sh("s3", fmt.Sprintf(`T=t; ${T}ouch %s/denied2`, dir)),
				sh("s4", fmt.Sprintf(`env bash -c "to\uch %s/denied3"`, dir)),
				sh("s5", fmt.Sprintf(`echo x > %s/denied4; rm -f %s`, dir, marker)),
			}},
			map[string]any{"tool_calls": []any{
				sh("s6", "echo ran >> "+marker),
				sh("s7", "echo ran >> "+marker),
				sh("s8", "echo ran >> "+marker),
			}},
			map[string]any{"content": "Done."},
		},
	}
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestToolPolicyOnWorker runs a policed agent on the dev stack's worker
// and local sandbox: the denied commands never ran (the files they would
// have created are absent), max_calls holds (three appends of four), and
// the model got policy_denied bodies naming the pattern or the limit.
func TestToolPolicyOnWorker(t *testing.T) {
	t.Parallel()
	s := startDev(t, "", app.DevConfig{Workers: 1})
	marker := markerPath(t)
	r := s.submit(t, policySpec(t, marker), "go")
	r = s.waitRun(t, r.ID)
	if r.Status != runs.RunSucceeded || r.Output == nil {
		t.Fatalf("run ended %s (%s)", r.Status, r.Error)
	}
	if n := executions(t, marker); n != 3 {
		t.Errorf("marker has %d appends, want 3 (max_calls.run_shell_command 3)", n)
	}
	for i := 1; i <= 4; i++ {
		p := filepath.Join(filepath.Dir(marker), fmt.Sprintf("denied%d", i))
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists (stat: %v): a denied command ran", p, err)
		}
	}
	out, err := session.Open(context.Background(), s.dev.Backend.Store, *r.Output)
	if err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for _, c := range out.Version().Chunks {
		if tr, ok := c.ToolResult(); ok {
			bodies = append(bodies, tr.Content)
		}
	}
	want := []string{
		`"exit_code":0`,
		`command_deny pattern \"touch\"`,
		`computed when the command runs`,
		`command_deny pattern \"touch\"`,
		`command_deny pattern \"rm\"`,
		`"exit_code":0`,
		`"exit_code":0`,
		`policy.max_calls.run_shell_command is 3`,
	}
	if len(bodies) != len(want) {
		t.Fatalf("%d tool results, want %d: %q", len(bodies), len(want), bodies)
	}
	for i, w := range want {
		if !strings.Contains(bodies[i], w) {
			t.Errorf("result %d = %s, want it to contain %s", i+1, bodies[i], w)
		}
		if strings.HasPrefix(w, `"exit`) == strings.Contains(bodies[i], `"error_kind":"policy_denied"`) {
			t.Errorf("result %d = %s: policy_denied where it should run, or the reverse", i+1, bodies[i])
		}
	}
}

// TestToolPolicyRefusedAtSubmit: a bad policy is refused by the
// coordinator, naming the field.
func TestToolPolicyRefusedAtSubmit(t *testing.T) {
	t.Parallel()
	s := startDev(t, "", app.DevConfig{Workers: 1})
	for spec, want := range map[string]string{
		`{"name":"p","model":"scripted","script":[{"content":"x"}],"policy":{"max_calls":{"run_code":0}}}`: "policy.max_calls.run_code",
		`{"name":"p","model":"scripted","script":[{"content":"x"}],"policy":{"command_deny":["/bin/rm"]}}`: "policy.command_deny[0]",
	} {
		err := s.cl.Do(context.Background(), "POST", "/v1/runs", map[string]any{"agent": json.RawMessage(spec), "message": "x"}, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("submit %s: %v, want a refusal naming %s", spec, err, want)
		}
	}
}
