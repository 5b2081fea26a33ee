package replay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/selector"
	"github.com/rath-run/rath/pkg/session"
)

// countingModel answers agents with a numbered reply, a selector with
// "1" and a compressor with a summary, counting every call.
type countingModel struct{ calls atomic.Int64 }

func (m *countingModel) Chat(_ context.Context, req llm.Request) (llm.Response, error) {
	n := m.calls.Add(1)
	last := req.Messages[len(req.Messages)-1].Content
	reply := fmt.Sprintf("reply %d", n)
	switch {
	case strings.HasPrefix(last, "Candidate workflows:"):
		reply = "I pick 1"
	case last == flow.DefaultCompressInstruction:
		reply = fmt.Sprintf("  summary of %d messages  ", len(req.Messages))
	}
	return llm.Response{Content: reply, Model: req.Model, FinishReason: llm.FinishStop,
		Usage: session.Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5}}, nil
}

// recorder is a runtime that records each step as the run store would:
// key, call and input in the order they are put, output once committed.
type recorder struct {
	inner flow.Runtime
	mu    sync.Mutex
	steps []RunStep
}

func (r *recorder) Step(ctx context.Context, key string, call flow.Call, in session.Session) (session.Session, error) {
	r.mu.Lock()
	i := len(r.steps)
	r.steps = append(r.steps, RunStep{Key: key, Call: call, Input: in.ID()})
	r.mu.Unlock()
	out, err := r.inner.Step(ctx, key, call, in)
	if err == nil {
		r.mu.Lock()
		r.steps[i].Output = out.ID()
		r.mu.Unlock()
	}
	return out, err
}

// fanOutWorkflow is a 3-way fan-out → merge → compress → select → agent.
func fanOutWorkflow() flow.Workflow {
	spec := func(name string) agent.Spec { return agent.Spec{Name: name, Model: "fake"} }
	return flow.Seq(
		flow.Fanout(3, flow.NewAgent(spec("researcher"), "researches")),
		&flow.Compressor{Spec: spec("squeeze")},
		flow.Func(func(ctx context.Context, s session.Session) (session.Session, error) {
			sel := selector.New(spec("router"))
			w, out, err := sel.Select(ctx, s, flow.NewAgent(spec("writer"), "writes"), flow.NewAgent(spec("critic"), "criticises"))
			if err != nil {
				return session.Session{}, err
			}
			return w.Forward(ctx, out)
		}),
	)
}

// recordRun runs fanOutWorkflow on g and returns the recording.
func recordRun(t *testing.T, g session.Graph, m *countingModel) RecordedRun {
	t.Helper()
	return recordRunAs(t, g, m, "run_replaytest")
}

// recordRunAs is recordRun with the run's id.
func recordRunAs(t testing.TB, g session.Graph, m *countingModel, runID string) RecordedRun {
	t.Helper()
	ctx := context.Background()
	in, err := session.New(ctx, g, session.User("write a poem about graphs"))
	if err != nil {
		t.Fatal(err)
	}
	local, err := flow.NewLocal(runID, flow.Env{Resolve: func(s agent.Spec) (llm.Provider, string, error) { return m, s.Model, nil }})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{inner: local}
	out, err := flow.Run(ctx, rec, fanOutWorkflow(), in)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	id := out.ID()
	return RecordedRun{ID: runID, Input: in.ID(), Output: &id, Steps: rec.steps}
}

func TestRunReplaysAWholeWorkflow(t *testing.T) {
	ctx := context.Background()
	g := session.NewMemoryGraph()
	m := &countingModel{}
	rec := recordRun(t, g, m)
	if len(rec.Steps) != 6 {
		t.Fatalf("recorded %d steps, want 6 (3 agents, compress, select, agent)", len(rec.Steps))
	}
	calls := m.calls.Load()
	rep, err := Run(ctx, g, rec, Options{Strict: true, Worker: "test"})
	if err != nil {
		t.Fatalf("strict replay: %v\n%+v", err, rep)
	}
	if n := m.calls.Load() - calls; n != 0 {
		t.Errorf("replay called the model %d times", n)
	}
	if !rep.Identical || rep.Diverged != "" || rep.Replay == nil || *rep.Replay == *rec.Output {
		t.Fatalf("report = %+v", rep)
	}
	kinds := map[string]int{}
	for _, row := range rep.Steps {
		kinds[row.Kind]++
		if !row.Identical || row.Replay == nil || *row.Replay == row.Original {
			t.Errorf("row %+v", row)
		}
	}
	for _, row := range rep.Steps {
		o, _ := g.Get(ctx, row.Original)
		r, _ := g.Get(ctx, *row.Replay)
		if row.Kind == "select" && r.Usage != o.Usage {
			t.Errorf("replayed decision usage %+v, recorded %+v", r.Usage, o.Usage)
		}
	}
	if kinds["agent"] != 4 || kinds["select"] != 1 || kinds["compress"] != 1 || kinds[KindMerge] != 2 {
		t.Errorf("rows by kind = %v, want 4 agent, 1 select, 1 compress, 2 merge", kinds)
	}
	// Same transcript, new versions; the original is untouched.
	orig, _ := session.Open(ctx, g, *rec.Output)
	repl, _ := session.Open(ctx, g, *rep.Replay)
	oc, _ := orig.Chunks(ctx)
	rc, _ := repl.Chunks(ctx)
	if len(oc) != len(rc) {
		t.Fatalf("replayed output has %d chunks, original %d", len(rc), len(oc))
	}
	for i := range oc {
		if oc[i].Hash() != rc[i].Hash() {
			t.Errorf("chunk %d: %s, original %s", i, rc[i].Hash(), oc[i].Hash())
		}
	}
	if descends(t, g, *rep.Replay, *rec.Output) {
		t.Errorf("the replay descends from the original output")
	}
}

func TestRunStrictNamesTheDivergingStep(t *testing.T) {
	ctx := context.Background()
	g := session.NewMemoryGraph()
	m := &countingModel{}
	rec := recordRun(t, g, m)
	// Tamper with the recorded input of the last agent step: it is now
	// the run's input, so the replayed request lacks the summary.
	last := len(rec.Steps) - 1
	rec.Steps[last].Input = rec.Input
	calls := m.calls.Load()
	rep, err := Run(ctx, g, rec, Options{Strict: true})
	if !errors.Is(err, ErrDiverged) {
		t.Fatalf("err = %v, want ErrDiverged", err)
	}
	key := rec.Steps[last].Key
	if !strings.Contains(err.Error(), "step "+key+" ") || !strings.Contains(err.Error(), "round 1") {
		t.Errorf("err = %v, want it to name step %s and round 1", err, key)
	}
	if rep.Identical || !strings.Contains(rep.Diverged, key) {
		t.Errorf("report = %+v", rep)
	}
	if m.calls.Load() != calls {
		t.Errorf("replay called the model")
	}
	// A tampered selector candidate diverges at the select step, with the
	// message named, also when not strict.
	rec = recordRun(t, g, m)
	for i, st := range rec.Steps {
		if st.Call.Kind == flow.KindSelect {
			rec.Steps[i].Call.Candidates = []string{"writes", "criticises harshly"}
			key = st.Key
		}
	}
	rep, err = Run(ctx, g, rec, Options{})
	if err != nil {
		t.Fatalf("lenient replay: %v", err)
	}
	if rep.Identical || !strings.HasPrefix(rep.Diverged, "step "+key+" (select): round 1: message ") {
		t.Errorf("diverged = %q, want the select step %s", rep.Diverged, key)
	}
}

// descends reports whether of has ancestor among its ancestors.
func descends(t *testing.T, g session.Graph, of, ancestor session.ID) bool {
	t.Helper()
	seen := map[session.ID]bool{}
	todo := []session.ID{of}
	for len(todo) > 0 {
		id := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if id == ancestor {
			return true
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		v, err := g.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		todo = append(todo, v.Parents...)
	}
	return false
}

// BenchmarkRunReplay replays the 8-step fan-out → merge → compress →
// select → agent run (6 steps, 2 merges) on the memory graph.
func BenchmarkRunReplay(b *testing.B) {
	ctx := context.Background()
	g := session.NewMemoryGraph()
	rec := recordRunAs(b, g, &countingModel{}, "run_bench")
	b.ResetTimer()
	for b.Loop() {
		if _, err := Run(ctx, g, rec, Options{Strict: true}); err != nil {
			b.Fatal(err)
		}
	}
}
