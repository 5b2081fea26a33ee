package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/sandbox/local"
	"github.com/rath-run/rath/pkg/sandbox/sandboxtest"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/tool"
	"github.com/rath-run/rath/pkg/tool/builtin"
)

// shellRig is a one-round step whose call runs run_shell_command in a
// local sandbox: the command appends a line to ran.txt, so the file counts
// its executions.
func shellRig(t *testing.T) (*agent.Agent, agent.Meta, func() int) {
	t.Helper()
	ws := sandboxtest.Dir(t)
	sb, err := local.New(local.Config{}).Open(context.Background(), session.Spec{}, ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close(context.Background()) })
	set, err := builtin.NewRegistry().Select([]string{builtin.RunShellCommand})
	if err != nil {
		t.Fatal(err)
	}
	replies := []llm.ScriptReply{
		{ToolCalls: []session.ToolCall{call("s1", builtin.RunShellCommand, `{"cmd":"echo x >> ran.txt"}`)}},
		{Content: "done"},
	}
	a := &agent.Agent{Spec: agent.Spec{Name: "tester", Model: "scripted"}, Provider: &llm.Scripted{Replies: replies}, Tools: set}
	ran := func() int {
		b, err := os.ReadFile(filepath.Join(ws, "ran.txt"))
		if err != nil {
			return 0
		}
		return strings.Count(string(b), "\n")
	}
	return a, agent.Meta{Sandbox: sb, Checkpoint: func(context.Context) (string, error) { return "snap", nil }}, ran
}

// TestJournalCommandsNeedNoNetwork: run_shell_command is idempotent only
// in a sandbox without network. A call a crash left started without a
// result runs again there; with network (Meta.Network) it is ambiguous.
// A call whose result was recorded in a round whose end was not (the
// workspace it changed is lost) runs again without network and is
// ambiguous with network, marked workspace_lost.
func TestJournalCommandsNeedNoNetwork(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		crashAt  int // 2: the start is stored; 3: the result is stored
		network  bool
		wantRuns int // executions in all, when the resume succeeds
		wantLost bool
	}{
		{2, false, 1, false},
		{2, true, 0, false},
		{3, false, 2, false}, // the round's workspace is rebuilt
		{3, true, 1, true},
	} {
		t.Run(fmt.Sprintf("record%d/network=%v", tc.crashAt, tc.network), func(t *testing.T) {
			a, m, ran := shellRig(t)
			m.Network = tc.network
			j := &memJournal{crashAt: tc.crashAt}
			m.Journal = j
			in := userSession(t, "run it")
			if _, err := a.Run(ctx, in, m); !errors.Is(err, errCrash) {
				t.Fatalf("first delivery: got %v, want the crash", err)
			}
			j.crashAt = 0
			_, err := a.Run(ctx, in, m)
			var amb *agent.AmbiguousError
			if tc.network {
				if !errors.As(err, &amb) || amb.CallID != "s1" || amb.Tool != builtin.RunShellCommand || amb.WorkspaceLost != tc.wantLost {
					t.Fatalf("with network: got %v (%+v), want an ambiguous s1 (workspace_lost %v)", err, amb, tc.wantLost)
				}
				if ran() != tc.wantRuns {
					t.Fatalf("with network: the command ran %d times, want %d (not again)", ran(), tc.wantRuns)
				}
				return
			}
			if err != nil {
				t.Fatalf("without network: %v", err)
			}
			if ran() != tc.wantRuns {
				t.Fatalf("without network: the command ran %d times, want %d", ran(), tc.wantRuns)
			}
		})
	}
}

// TestJournalWriteFileIgnoresNetwork: write_workspace_file writes one
// file whatever the network: a started call runs again with network too.
func TestJournalWriteFileIgnoresNetwork(t *testing.T) {
	ctx := context.Background()
	a, m, _ := shellRig(t)
	set, err := builtin.NewRegistry().Select([]string{builtin.WriteWorkspaceFile})
	if err != nil {
		t.Fatal(err)
	}
	a.Tools = set
	a.Provider = &llm.Scripted{Replies: []llm.ScriptReply{
		{ToolCalls: []session.ToolCall{call("w1", builtin.WriteWorkspaceFile, `{"path":"a.txt","content":"a"}`)}},
		{Content: "done"},
	}}
	m.Network = true
	j := &memJournal{crashAt: 2}
	m.Journal = j
	in := userSession(t, "write it")
	if _, err := a.Run(ctx, in, m); !errors.Is(err, errCrash) {
		t.Fatalf("first delivery: got %v, want the crash", err)
	}
	j.crashAt = 0
	if _, err := a.Run(ctx, in, m); err != nil {
		t.Fatalf("write_workspace_file with network: %v, want it run again", err)
	}
}

// TestJournalMCPResultKept: an idempotent MCP tool's recorded result is
// reused in a round whose end was not recorded: it runs on the worker
// host, not in the restored workspace, so running it again rebuilds
// nothing.
func TestJournalMCPResultKept(t *testing.T) {
	ctx := context.Background()
	_, m, _ := shellRig(t)
	var calls atomic.Int64
	ct := &funcTool{name: "srv__count", call: func(context.Context, json.RawMessage) (any, error) {
		return map[string]any{"n": calls.Add(1)}, nil
	}}
	set, _ := tool.NewSet(ct)
	a := &agent.Agent{Spec: agent.Spec{Name: "tester", Model: "scripted",
		MCP: []agent.MCPServer{{Name: "srv", Command: "srv", Idempotent: []string{"*"}}}},
		Provider: &llm.Scripted{Replies: []llm.ScriptReply{
			{ToolCalls: []session.ToolCall{call("c1", "srv__count", `{}`)}},
			{Content: "done"},
		}}, Tools: set}
	j := &memJournal{crashAt: 3} // the result is stored, then the crash
	m.Journal = j
	in := userSession(t, "count")
	if _, err := a.Run(ctx, in, m); !errors.Is(err, errCrash) {
		t.Fatalf("first delivery: got %v, want the crash", err)
	}
	j.crashAt = 0
	if _, err := a.Run(ctx, in, m); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 1 {
		t.Fatalf("srv__count ran %d times, want 1 (its recorded result reused)", calls.Load())
	}
}
