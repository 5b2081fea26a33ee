package agent_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/sandbox/local"
	"github.com/rath-run/rath/pkg/sandbox/sandboxtest"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/tool/builtin"
)

// TestJournalCheckpointsOnlyAfterWrites: a round's end takes a workspace
// checkpoint only when one of its tools may have changed the workspace;
// a round of read-only calls records the previous checkpoint, which is
// the snapshot of the tree as it is. The first round's end always takes
// one (there is no earlier checkpoint in the delivery).
func TestJournalCheckpointsOnlyAfterWrites(t *testing.T) {
	ctx := context.Background()
	ws := sandboxtest.Dir(t)
	sb, err := local.New(local.Config{}).Open(ctx, session.Spec{}, ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close(context.Background()) })
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("0"), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := builtin.NewRegistry().Select([]string{builtin.ReadWorkspaceFile, builtin.WriteWorkspaceFile})
	if err != nil {
		t.Fatal(err)
	}
	read := func(id string) llm.ScriptReply {
		return llm.ScriptReply{ToolCalls: []session.ToolCall{call(id, builtin.ReadWorkspaceFile, `{"path":"a.txt"}`)}}
	}
	write := func(id, content string) llm.ScriptReply {
		return llm.ScriptReply{ToolCalls: []session.ToolCall{call(id, builtin.WriteWorkspaceFile, `{"path":"a.txt","content":"`+content+`"}`)}}
	}
	replies := []llm.ScriptReply{read("r1"), write("w2", "2"), read("r3"), read("r4"), write("w5", "5"), {Content: "done"}}
	a := &agent.Agent{Spec: agent.Spec{Name: "tester", Model: "scripted"}, Provider: &llm.Scripted{Replies: replies}, Tools: set}

	var taken []string
	snap := func(context.Context) (string, error) { // the tree's content is its id
		b, err := os.ReadFile(filepath.Join(ws, "a.txt"))
		if err != nil {
			return "", err
		}
		taken = append(taken, "snap-"+string(b))
		return "snap-" + string(b), nil
	}
	j := &memJournal{}
	if _, err := a.Run(ctx, userSession(t, "go"), agent.Meta{Sandbox: sb, Journal: j, Checkpoint: snap}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"snap-0", "snap-2", "snap-5"}; !slices.Equal(taken, want) {
		t.Errorf("checkpoints taken: %q, want %q (rounds 1, 2 and 5)", taken, want)
	}
	var recorded []string
	for _, e := range j.entries {
		if e.Kind == agent.JournalRound {
			var d struct{ Snapshot string }
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			recorded = append(recorded, d.Snapshot)
		}
	}
	if want := []string{"snap-0", "snap-2", "snap-2", "snap-2", "snap-5"}; !slices.Equal(recorded, want) {
		t.Errorf("round ends recorded snapshots %q, want %q", recorded, want)
	}
}
