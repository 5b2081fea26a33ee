package flow_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/session"
)

// appendWF appends one assistant chunk: a workflow with no model.
func appendWF(text string) flow.Workflow {
	return flow.Func(func(ctx context.Context, s session.Session) (session.Session, error) {
		return s.Append(ctx, session.Assistant(text))
	})
}

// TestParallelMergesInBranchOrder: three branches on forks of the input,
// merged in branch order, the shared history once.
func TestParallelMergesInBranchOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := session.NewMemoryGraph()
	in := mustUser(t, g, "question")
	rt, _ := flow.NewLocal("p", scriptedEnv())
	out, err := flow.Run(ctx, rt, flow.Par(appendWF("a"), appendWF("b"), appendWF("c")), in)
	if err != nil {
		t.Fatal(err)
	}
	got := texts(t, out)
	want := []string{"user:question", "assistant:a", "assistant:b", "assistant:c"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("transcript %q, want %q", got, want)
	}
	forks := 0
	for _, v := range g.Versions() {
		if v.Op == session.OpFork && v.Parents[0] == in.ID() {
			forks++
		}
	}
	if forks != 3 || out.Op() != session.OpMerge {
		t.Fatalf("%d forks of the input and output op %s, want 3 and merge", forks, out.Op())
	}
}

// TestFanoutAgentsGetTheirOwnKeys: Fanout(3, agent) is three agent steps
// with distinct keys, each on its own fork.
func TestFanoutAgentsGetTheirOwnKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := session.NewMemoryGraph()
	rt, _ := flow.NewLocal("f", scriptedEnv())
	a := flow.NewAgent(scriptedSpec("writer", "draft"), "")
	out, err := flow.Run(ctx, rt, flow.Seq(a, flow.Fanout(3, flow.NewAgent(scriptedSpec("critic", "x", "critique"), ""))), mustUser(t, g, "go"))
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, v := range g.Versions() {
		if v.Op == session.OpStep {
			keys[v.Key] = true
		}
	}
	for _, k := range []string{"f/1", "f/2.b0.1", "f/2.b1.1", "f/2.b2.1"} {
		if !keys[k] {
			t.Fatalf("no step %s among %v", k, keys)
		}
	}
	want := "[user:go assistant:draft assistant:critique assistant:critique assistant:critique]"
	if got := fmt.Sprint(texts(t, out)); got != want {
		t.Fatalf("transcript %s, want %s", got, want)
	}
}

// TestParallelFirstErrorCancels: a failing branch cancels the others
// (blocked until canceled) and its error is returned.
func TestParallelFirstErrorCancels(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	blocked := flow.Func(func(ctx context.Context, s session.Session) (session.Session, error) {
		<-ctx.Done()
		return session.Session{}, context.Cause(ctx)
	})
	failing := flow.Func(func(context.Context, session.Session) (session.Session, error) { return session.Session{}, boom })
	rt, _ := flow.NewLocal("e", scriptedEnv())
	_, err := flow.Run(context.Background(), rt, flow.Par(blocked, failing, blocked), mustUser(t, session.NewMemoryGraph(), "x"))
	if !errors.Is(err, boom) {
		t.Fatalf("error %v, want boom", err)
	}
}

// TestParallelLimit: no more than Limit branches run at once.
func TestParallelLimit(t *testing.T) {
	t.Parallel()
	var active, peak atomic.Int32
	w := flow.Func(func(ctx context.Context, s session.Session) (session.Session, error) {
		n := active.Add(1)
		defer active.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		return s.Append(ctx, session.Assistant("ok"))
	})
	p := flow.Fanout(8, w)
	p.Limit = 2
	rt, _ := flow.NewLocal("l", scriptedEnv())
	out, err := flow.Run(context.Background(), rt, p, mustUser(t, session.NewMemoryGraph(), "x"))
	if err != nil {
		t.Fatal(err)
	}
	if peak.Load() > 2 || out.Len() != 9 {
		t.Fatalf("peak %d branches at once (limit 2), output %d chunks (want 9)", peak.Load(), out.Len())
	}
}

// TestNestedParallel: fan-outs nest, because a Parallel is a Workflow.
func TestNestedParallel(t *testing.T) {
	t.Parallel()
	rt, _ := flow.NewLocal("n", scriptedEnv())
	wf := flow.Par(flow.Par(appendWF("a1"), appendWF("a2")), flow.Seq(appendWF("b"), flow.Par(appendWF("b1"), appendWF("b2"))))
	out, err := flow.Run(context.Background(), rt, wf, mustUser(t, session.NewMemoryGraph(), "x"))
	if err != nil {
		t.Fatal(err)
	}
	want := "[user:x assistant:a1 assistant:a2 assistant:b assistant:b1 assistant:b2]"
	if got := fmt.Sprint(texts(t, out)); got != want {
		t.Fatalf("transcript %s, want %s", got, want)
	}
}
