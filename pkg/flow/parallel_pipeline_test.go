package flow_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/session"
)

// TestParallelMergesWhileLaterBranchesRun: the fan-in merges branches 0
// and 1 while branch 2 still runs (it is held until the merge is in the
// graph), and the output is the same as merging after all of them.
func TestParallelMergesWhileLaterBranchesRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := session.NewMemoryGraph()
	in := mustUser(t, g, "question")
	release := make(chan struct{})
	held := flow.Func(func(ctx context.Context, s session.Session) (session.Session, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return session.Session{}, ctx.Err()
		}
		return s.Append(ctx, session.Assistant("c"))
	})
	merges := func() int {
		n := 0
		for _, v := range g.Versions() {
			if v.Op == session.OpMerge {
				n++
			}
		}
		return n
	}
	rt, _ := flow.NewLocal("m", scriptedEnv())
	type result struct {
		out session.Session
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := flow.Run(ctx, rt, flow.Par(appendWF("a"), appendWF("b"), held), in)
		done <- result{out, err}
	}()
	testenv.Eventually(t, 30*time.Second, "the merge of branches 0 and 1 before branch 2 ends", func() bool { return merges() == 1 })
	close(release)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := []string{"user:question", "assistant:a", "assistant:b", "assistant:c"}
	if got := texts(t, r.out); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("transcript %q, want %q", got, want)
	}
	if n := merges(); n != 2 || r.out.Op() != session.OpMerge {
		t.Fatalf("%d merges, output op %s; want 2 and merge", n, r.out.Op())
	}
}

// TestParallelMergeErrorCancelsBranches: a merge that fails (here, two
// branches on different graphs) cancels the branches still running and
// is returned.
func TestParallelMergeErrorCancelsBranches(t *testing.T) {
	t.Parallel()
	other := mustUser(t, session.NewMemoryGraph(), "elsewhere")
	foreign := flow.Func(func(context.Context, session.Session) (session.Session, error) { return other, nil })
	blocked := flow.Func(func(ctx context.Context, s session.Session) (session.Session, error) {
		<-ctx.Done()
		return session.Session{}, context.Cause(ctx)
	})
	rt, _ := flow.NewLocal("x", scriptedEnv())
	_, err := flow.Run(context.Background(), rt, flow.Par(appendWF("a"), foreign, blocked), mustUser(t, session.NewMemoryGraph(), "x"))
	if err == nil || !errors.Is(err, session.ErrDifferentGraph) {
		t.Fatalf("error %v, want the merge's ErrDifferentGraph", err)
	}
}
