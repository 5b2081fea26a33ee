package flow_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/llm/llmtest"
	"github.com/rath-run/rath/pkg/selector"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/store/storeurl"
)

// durableWorkflow uses every kind of step: an agent, a fan-out of three
// merged, a selector loop over two agents, a compressor, a last agent.
func durableWorkflow() flow.Workflow {
	a := flow.NewAgent(modelSpec("planner"), "plans")
	b := flow.NewAgent(modelSpec("critic"), "criticises")
	c := flow.NewAgent(modelSpec("writer"), "writes")
	loop := &selector.Loop{Selector: selector.New(modelSpec("router")), Candidates: []flow.Workflow{b, c}, MaxRounds: 4}
	return flow.Seq(a, flow.Fanout(3, b), loop, &flow.Compressor{Spec: modelSpec("squash")}, c)
}

func openStore(t *testing.T, url string) store.Store {
	t.Helper()
	st, err := storeurl.Open(context.Background(), url, storeurl.Options{Migrate: true, Create: true})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// TestLocalRunIsDurable re-runs a finished workflow with the same run id on
// the same store: no model call is made again and every step, the fan-in
// merges and the output come back with the same version ids. A new run id
// executes afresh. Both stores: embedded SQLite and Postgres.
func TestLocalRunIsDurable(t *testing.T) {
	t.Parallel()
	for name, url := range map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "rath.db") },
		"postgres": func(t *testing.T) string { return testdb.Postgres(t) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := openStore(t, url(t))
			srv := llmtest.NewServer(t)
			srv.Handle(answer)
			in := mustUser(t, st, "write a haiku about durable runs")
			env := serverEnv(t, srv)

			run := func(id string) session.Session {
				t.Helper()
				rt, err := flow.NewLocal(id, env)
				if err != nil {
					t.Fatal(err)
				}
				out, err := flow.Run(ctx, rt, durableWorkflow(), in)
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			first := run("run-a")
			calls := len(srv.Requests())
			// 1 planner + 3 critics + the loop (select → critic, select →
			// writer, select → none) + 1 compress + 1 writer.
			if calls != 1+3+5+1+1 {
				t.Fatalf("%d model calls, want 11", calls)
			}
			steps := stepVersions(t, st, "run-a")
			if len(steps) != calls {
				t.Fatalf("%d committed steps for %d model calls", len(steps), calls)
			}

			again := run("run-a")
			if n := len(srv.Requests()); n != calls {
				t.Fatalf("re-run made %d more model calls, want none", n-calls)
			}
			if again.ID() != first.ID() {
				t.Fatalf("re-run output %s, first %s", again.ID(), first.ID())
			}
			if got := stepVersions(t, st, "run-a"); len(got) != len(steps) {
				t.Fatalf("re-run committed %d steps, want the same %d", len(got), len(steps))
			}

			other := run("run-b")
			if n := len(srv.Requests()); n != 2*calls {
				t.Fatalf("a new run made %d model calls, want %d", n-calls, calls)
			}
			if other.ID() == first.ID() {
				t.Fatal("a new run returned the first run's output")
			}
			if texts(t, other)[0] != texts(t, first)[0] {
				t.Fatalf("the runs diverged: %q vs %q", texts(t, other), texts(t, first))
			}
		})
	}
}

// stepVersions lists the versions whose key belongs to run.
func stepVersions(t *testing.T, st store.Store, run string) map[string]session.ID {
	t.Helper()
	out := map[string]session.ID{}
	p := store.ListParams{Limit: store.MaxListLimit}
	for {
		page, err := st.List(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range page.Versions {
			if len(v.Key) > len(run) && v.Key[:len(run)+1] == run+"/" {
				out[v.Key] = v.ID
			}
		}
		if page.Next == "" {
			return out
		}
		p.After = page.Next
	}
}

// plainGraph hides GetByKey: a graph that cannot look steps up.
type plainGraph struct{ session.Graph }

// TestLocalWithoutKeyLookupReExecutes: over a graph without GetByKey the
// runtime cannot skip steps, so a re-run calls the model again; the commit
// is still idempotent (Put by key returns the committed version).
func TestLocalWithoutKeyLookupReExecutes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := llmtest.NewServer(t)
	srv.Handle(answer)
	g := plainGraph{session.NewMemoryGraph()}
	in := mustUser(t, g, "hi")
	rt, err := flow.NewLocal("plain", serverEnv(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	wf := flow.NewAgent(modelSpec("planner"), "")
	first, err := flow.Run(ctx, rt, wf, in)
	if err != nil {
		t.Fatal(err)
	}
	again, err := flow.Run(ctx, rt, wf, in)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Fatalf("%d model calls, want 2 (no key lookup)", n)
	}
	if again.ID() != first.ID() {
		t.Fatalf("re-run committed %s, want the keyed version %s", again.ID(), first.ID())
	}
}

func TestNewLocalValidates(t *testing.T) {
	t.Parallel()
	for _, run := range []string{"", "a/b", "has space", string(make([]byte, 129))} {
		if _, err := flow.NewLocal(run, scriptedEnv()); err == nil {
			t.Errorf("run id %q accepted", run)
		}
	}
	if _, err := flow.NewLocal("ok", flow.Env{}); err == nil {
		t.Error("an Env without Resolve accepted")
	}
}

// TestLocalCatchesAChangedWorkflow: a durable local run re-executed after
// its code changed what a step gets (another message before the writer, or
// another agent at the key) fails with ErrNondeterministic naming the step,
// and makes no model call; an unchanged re-run and one that accepts the
// changes return the recorded steps.
func TestLocalCatchesAChangedWorkflow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t, "sqlite:"+filepath.Join(t.TempDir(), "rath.db"))
	srv := llmtest.NewServer(t)
	srv.Handle(answer)
	in := mustUser(t, st, "write a haiku")
	env := serverEnv(t, srv)
	workflow := func(note string, writer string) flow.Workflow {
		appendNote := flow.Func(func(ctx context.Context, s session.Session) (session.Session, error) {
			return s.Append(ctx, session.User(note))
		})
		return flow.Seq(flow.NewAgent(modelSpec("planner"), "plans"), flow.Fanout(2, flow.NewAgent(modelSpec("critic"), "criticises")),
			appendNote, flow.NewAgent(modelSpec(writer), "writes"))
	}
	run := func(w flow.Workflow, accept bool) (session.Session, error) {
		rt, err := flow.NewLocal("changed", env)
		if err != nil {
			t.Fatal(err)
		}
		if accept {
			rt.AcceptChanges()
		}
		return flow.Run(ctx, rt, w, in)
	}
	first, err := run(workflow("be brief", "writer"), false)
	if err != nil {
		t.Fatal(err)
	}
	calls := len(srv.Requests())
	if again, err := run(workflow("be brief", "writer"), false); err != nil || again.ID() != first.ID() {
		t.Fatalf("unchanged re-run: %v, %s vs %s", err, again.ID(), first.ID())
	}
	for name, w := range map[string]flow.Workflow{
		"another message": workflow("be verbose", "writer"),
		"another agent":   workflow("be brief", "poet"),
	} {
		_, err := run(w, false)
		var nd *flow.NondeterministicError
		if !errors.Is(err, flow.ErrNondeterministic) || !errors.As(err, &nd) {
			t.Fatalf("%s: err = %v, want ErrNondeterministic", name, err)
		}
		if flow.StepID("changed", nd.Key) != first.Version().Key || !strings.Contains(err.Error(), "step "+nd.Key) {
			t.Fatalf("%s: the error names step %q, not the writer's %s: %v", name, nd.Key, first.Version().Key, err)
		}
		if nd.Recorded == nd.New || nd.Recorded == "" {
			t.Fatalf("%s: recorded %q, new %q", name, nd.Recorded, nd.New)
		}
	}
	if n := len(srv.Requests()); n != calls {
		t.Fatalf("the refused re-runs made %d model calls", n-calls)
	}
	accepted, err := run(workflow("be verbose", "writer"), true)
	if err != nil || accepted.ID() != first.ID() {
		t.Fatalf("accepting the changes: %v, %s vs the recorded %s", err, accepted.ID(), first.ID())
	}
}
