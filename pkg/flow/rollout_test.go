package flow_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/sandbox"
	"github.com/rath-run/rath/pkg/sandbox/local"
	"github.com/rath-run/rath/pkg/sandbox/sandboxtest"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/trainset"
)

// verifyEnv is scriptedEnv with a workspace: a local sandbox over dir
// (one directory for every step, so a test can put files the verifier
// reads), counting the verifier runs.
func verifyEnv(t *testing.T, dir string, opened *atomic.Int32) flow.Env {
	t.Helper()
	env := scriptedEnv()
	b := local.New(local.Config{})
	env.Workspace = func(ctx context.Context, in *session.Version) (sandbox.Sandbox, func(context.Context, bool) (session.Placement, error), error) {
		opened.Add(1)
		sb, err := b.Open(ctx, in.Placement.Spec, dir)
		if err != nil {
			return nil, nil, err
		}
		return sb, func(ctx context.Context, ok bool) (session.Placement, error) {
			return in.Placement, sb.Close(ctx)
		}, nil
	}
	return env
}

// TestRolloutScoresEveryBranch: each branch's output gets a child version
// whose one chunk is the label chunk `rathctl label --score` writes (by
// "verifier"), the score read from the verifier's JSON stdout or its exit
// code; the output is the best branch; re-running the same run id runs
// neither an agent nor a verifier again.
func TestRolloutScoresEveryBranch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := sandboxtest.Dir(t)
	var opened atomic.Int32
	g := session.NewMemoryGraph()
	rt, err := flow.NewLocal("roll", verifyEnv(t, dir, &opened))
	if err != nil {
		t.Fatal(err)
	}
	branches := []*flow.Agent{
		flow.NewAgent(scriptedSpec("a", "from a"), ""),
		flow.NewAgent(scriptedSpec("b", "from b"), ""),
		flow.NewAgent(scriptedSpec("c", "from c"), ""),
	}
	// The verifier tells the branches apart by the order it runs in (a
	// counter file in the shared directory), so they run one at a time:
	// a prints a JSON score, b exits 3, c exits 0.
	r := &flow.Rollout{Branches: branches, Limit: 1, Verifier: flow.Verifier{Command: `n=$(cat count 2>/dev/null || echo 0); echo $((n+1)) > count
case $n in 0) echo '{"score": 0.7}';; 1) exit 3;; *) exit 0;; esac`}}
	in := mustUser(t, g, "task")
	run := func() []flow.RolloutResult {
		t.Helper()
		var res []flow.RolloutResult
		_, err := flow.Run(ctx, rt, flow.Func(func(ctx context.Context, s session.Session) (session.Session, error) {
			var err error
			res, err = r.Run(ctx, s)
			return s, err
		}), in)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := run()
	want := []float64{0.7, 0, 1}
	for i, br := range res {
		if br.Score != want[i] {
			t.Errorf("branch %d: score %v, want %v", i, br.Score, want[i])
		}
		v := br.Scored.Version()
		if *v.Base != br.Output.ID() || len(v.Chunks) != 1 {
			t.Fatalf("branch %d: scored version %+v does not extend the output with one chunk", i, v)
		}
		l, ok := trainset.LabelOf(v.Chunks[0])
		if !ok || l.By != flow.VerifierBy || *l.Score != want[i] {
			t.Errorf("branch %d: label %+v ok=%v", i, l, ok)
		}
		if v.Key != flow.StepID("roll", "1.b"+string(rune('0'+i))+".2") {
			t.Errorf("branch %d: verify key %q", i, v.Key)
		}
		if v.Producer.Agent != branches[i].Spec.Name {
			t.Errorf("branch %d: producer agent %q", i, v.Producer.Agent)
		}
	}
	if got := opened.Load(); got != 3 {
		t.Fatalf("verifier ran %d times, want 3", got)
	}
	// The same run again: every step is committed, nothing runs.
	again := run()
	for i := range again {
		if again[i].Scored.ID() != res[i].Scored.ID() || again[i].Score != res[i].Score {
			t.Errorf("branch %d re-ran: %s vs %s", i, again[i].Scored.ID(), res[i].Scored.ID())
		}
	}
	if got := opened.Load(); got != 3 {
		t.Fatalf("a re-executed rollout ran the verifier again (%d runs)", got)
	}
	// Forward returns the best branch's agent output (c, score 1).
	rt2, err := flow.NewLocal("roll2", verifyEnv(t, sandboxtest.Dir(t), &opened))
	if err != nil {
		t.Fatal(err)
	}
	out, err := flow.Run(ctx, rt2, r, in)
	if err != nil {
		t.Fatal(err)
	}
	if got := texts(t, out); got[len(got)-1] != "assistant:from c" {
		t.Errorf("rollout output ends %v, want c's reply", got)
	}
}

func TestVerifierScore(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		res  sandbox.ExecResult
		want float64
		err  string
	}{
		{sandbox.ExecResult{ExitCode: 0}, 1, ""},
		{sandbox.ExecResult{ExitCode: 2, Stdout: []byte("FAIL\n")}, 0, ""},
		{sandbox.ExecResult{ExitCode: 0, TimedOut: true}, 0, ""},
		{sandbox.ExecResult{ExitCode: 1, Stdout: []byte(" {\"score\": 0.25}\n")}, 0.25, ""},
		{sandbox.ExecResult{Stdout: []byte(`{"score": "high"}`)}, 0, "not {\"score\": N}"},
		{sandbox.ExecResult{Stdout: []byte(`{"points": 1}`)}, 0, "not {\"score\": N}"},
		{sandbox.ExecResult{Stdout: []byte(`{}`)}, 0, "no \"score\""},
		{sandbox.ExecResult{Stdout: []byte(`{"score": 1}{"score": 2}`)}, 0, "not {\"score\": N}"},
	} {
		got, err := flow.VerifierScore(tc.res)
		switch {
		case tc.err != "":
			if !errors.Is(err, flow.ErrBadVerifierOutput) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.res.Stdout, err, tc.err)
			}
		case err != nil || got != tc.want:
			t.Errorf("%+v: %v, %v; want %v", tc.res, got, err, tc.want)
		}
	}
}

func TestVerifyCallValidation(t *testing.T) {
	t.Parallel()
	spec := scriptedSpec("a", "x")
	for _, tc := range []struct {
		call flow.Call
		want string
	}{
		{flow.Call{Kind: flow.KindVerify, Agent: spec}, "verifier: a verify call needs a verifier"},
		{flow.Call{Kind: flow.KindVerify, Agent: spec, Verifier: &flow.Verifier{Command: " "}}, "verifier.command: required"},
		{flow.Call{Kind: flow.KindVerify, Agent: spec, Verifier: &flow.Verifier{Command: "true", TimeoutSeconds: -1}}, "verifier.timeout_seconds: -1 is outside"},
		{flow.Call{Kind: flow.KindAgent, Agent: spec, Verifier: &flow.Verifier{Command: "true"}}, "only a verify call takes a verifier"},
	} {
		err := tc.call.Validate()
		if !errors.Is(err, flow.ErrInvalidCall) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.call, err, tc.want)
		}
	}
	raw := []byte(`{"kind":"verify","agent":{"name":"a","model":"scripted","script":["x"]},"verifier":{"command":"make test","timeout_seconds":30}}`)
	c, err := flow.ParseTarget(raw)
	if err != nil || c.Kind != flow.KindVerify || c.Verifier == nil || c.Verifier.Command != "make test" || c.Verifier.TimeoutSeconds != 30 {
		t.Fatalf("ParseTarget: %+v, %v", c, err)
	}
	// A runtime without a sandbox refuses a verify step.
	g := session.NewMemoryGraph()
	_, err = flow.Execute(context.Background(), scriptedEnv(), "k", c, mustUser(t, g, "hi"))
	if err == nil || !strings.Contains(err.Error(), "opens no sandbox") {
		t.Fatalf("verify without a workspace: %v", err)
	}
}

// FuzzVerifierScore: any verifier output gives a finite score or an error
// wrapping ErrBadVerifierOutput, never a panic.
func FuzzVerifierScore(f *testing.F) {
	for _, s := range []string{`{"score": 1}`, `{"score": -0.5}`, `{"score": 1e400}`, `{}`, `{"score": "x"}`, "ok\n", ""} {
		f.Add([]byte(s), 0, false)
	}
	f.Fuzz(func(t *testing.T, stdout []byte, exit int, timedOut bool) {
		got, err := flow.VerifierScore(sandbox.ExecResult{Stdout: stdout, ExitCode: exit, TimedOut: timedOut})
		if err != nil {
			if !errors.Is(err, flow.ErrBadVerifierOutput) {
				t.Fatalf("error %v does not wrap ErrBadVerifierOutput", err)
			}
			return
		}
		if math.IsNaN(got) || math.IsInf(got, 0) {
			t.Fatalf("score %v is not finite", got)
		}
	})
}

// TestRolloutSelector: with a selector and no verifier, the branches run
// (no verify step), then one select step on the rollout's input chooses
// among them: its menu shows each branch's final reply, its decision
// records the branch versions, and the output is the chosen branch.
func TestRolloutSelector(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := session.NewMemoryGraph()
	rt, err := flow.NewLocal("judge", scriptedEnv())
	if err != nil {
		t.Fatal(err)
	}
	judge := flow.NewAgent(scriptedSpec("judge", "1: the second is right"), "")
	r := &flow.Rollout{Selector: judge, Branches: []*flow.Agent{
		flow.NewAgent(scriptedSpec("a", "41"), ""), flow.NewAgent(scriptedSpec("b", "42"), ""),
	}}
	in := mustUser(t, g, "6 x 7?")
	out, err := flow.Run(ctx, rt, r, in)
	if err != nil {
		t.Fatal(err)
	}
	dv, err := g.GetByKey(ctx, flow.StepID("judge", "2"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := flow.DecisionOf(session.Wrap(g, dv))
	if err != nil {
		t.Fatal(err)
	}
	if *dv.Base != in.ID() || d.Choice != 1 || len(d.Branches) != 2 || d.Candidates[1] != "branch 1 (b): 42" || d.Candidates[0] != "branch 0 (a): 41" {
		t.Fatalf("decision on %s: %+v", *dv.Base, d)
	}
	if out.ID() != d.Branches[1] {
		t.Fatalf("output %s, want the chosen branch %s", out.ID(), d.Branches[1])
	}
	if got := texts(t, out); got[len(got)-1] != "assistant:42" {
		t.Fatalf("output %v", got)
	}
	// No verify step ran.
	if _, err := g.GetByKey(ctx, flow.StepID("judge", "1.b0.2")); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("a verify step without a verifier: %v", err)
	}
	// Re-run with the same run id: Run reports the selected branch.
	res, err := r.Run(flow.WithRuntime(ctx, rt), in)
	if err != nil {
		t.Fatal(err)
	}
	if !res[1].Selected || res[0].Selected || !res[0].Scored.IsZero() || res[1].Output.ID() != out.ID() {
		t.Fatalf("results %+v", res)
	}
	// Neither a verifier nor a selector: refused.
	if _, err := (&flow.Rollout{Branches: r.Branches}).Run(flow.WithRuntime(ctx, rt), in); err == nil || !strings.Contains(err.Error(), "verifier, a selector or both") {
		t.Fatalf("no judge: %v", err)
	}
}
