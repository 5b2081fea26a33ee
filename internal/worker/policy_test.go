package worker_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/bus/bustest"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/internal/worker"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/sandbox"
	"github.com/rath-run/rath/pkg/sandbox/local"
	"github.com/rath-run/rath/pkg/sandbox/policy"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/tool/builtin"
)

// spyBackend is a backend registered under any name that records the specs
// it opens and runs them on local.
type spyBackend struct {
	name  string
	inner sandbox.Backend

	mu     sync.Mutex // guards following
	opened []session.Spec
}

func (b *spyBackend) Name() string                       { return b.name }
func (b *spyBackend) Capabilities() sandbox.Capabilities { return b.inner.Capabilities() }
func (b *spyBackend) Open(ctx context.Context, spec session.Spec, dir string) (sandbox.Sandbox, error) {
	b.mu.Lock()
	b.opened = append(b.opened, spec)
	b.mu.Unlock()
	return b.inner.Open(ctx, spec, dir)
}

func (b *spyBackend) opens() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.opened)
}

// policyRig is one worker held to a sandbox policy, with spies standing in
// for both backends.
type policyRig struct {
	bus           *bus.Bus
	graph         store.Store
	runs          *runs.Store
	local, docker *spyBackend
}

func newPolicyRig(t *testing.T, pol *policy.Policy) *policyRig {
	t.Helper()
	ctx := context.Background()
	b, _, _ := bustest.NewWith(t, bustest.Options{InProcess: true})
	st, rs := openStores(t)
	r := &policyRig{bus: b, graph: st, runs: rs,
		local:  &spyBackend{name: "local", inner: local.New(local.Config{})},
		docker: &spyBackend{name: "docker", inner: local.New(local.Config{})},
	}
	cons, err := b.Consumer(ctx, "policy")
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(st, rs, cons, b, scriptedResolve, worker.Config{
		Name: "policy-worker", Queue: "policy", Slots: 1, MaxDeliver: b.Config().MaxDeliver,
		FetchWait: 200 * time.Millisecond, ShutdownTimeout: 10 * time.Second, RetryDelay: 10 * time.Millisecond,
		Sandboxes: sandbox.NewRegistry(r.local, r.docker), SandboxPolicy: pol,
	})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	return r
}

// run forwards in through a scripted agent (with a shell tool call when
// tools is set) and returns the ended run.
func (r *policyRig) run(t *testing.T, in session.ID, tools bool) runs.Run {
	t.Helper()
	ctx := context.Background()
	spec := agent.Spec{Name: "prober", Model: "scripted", Script: []llm.ScriptReply{{Content: "no tools"}}}
	if tools {
		spec.Tools = []string{builtin.RunShellCommand}
		spec.Script = []llm.ScriptReply{call(builtin.RunShellCommand, map[string]string{"cmd": "echo ran"}), {Content: "done"}}
	}
	target, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	run := runs.Run{ID: runs.NewRunID(), Queue: "policy", Target: target, Input: in}
	if err := r.runs.Create(ctx, &run, []runs.Step{{Input: in}}); err != nil {
		t.Fatal(err)
	}
	st := run.Steps[0]
	if _, err := r.bus.Publish(ctx, bus.Job{StepID: st.ID, RunID: run.ID, Queue: run.Queue, Input: in.String(), Target: target}, nil); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "run "+run.ID+" to end", func() bool {
		if run, err = r.runs.Get(ctx, run.ID); err != nil {
			t.Fatal(err)
		}
		return run.Status.Terminal()
	})
	return run
}

func (r *policyRig) placed(t *testing.T, p session.Placement) session.ID {
	t.Helper()
	ctx := context.Background()
	s, err := session.FromUserMessage(ctx, r.graph, "hi")
	if err != nil {
		t.Fatal(err)
	}
	if p.Backend != "" {
		if s, err = s.To(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	return s.ID()
}

// TestWorkerEnforcesSandboxPolicy: a version whose placement entered
// below the API (stored before the policy, or by the store's owner) is
// checked again by the worker: the step fails at once, permanently,
// naming the field, and no sandbox is opened.
func TestWorkerEnforcesSandboxPolicy(t *testing.T) {
	t.Parallel()
	r := newPolicyRig(t, policy.Default(false, "rath-sandbox:busybox"))
	for _, c := range []struct {
		p     session.Placement
		field string
	}{
		{session.Placement{Backend: "local"}, `placement.backend: "local" is not allowed by the operator's sandbox policy (allowed: docker)`},
		{session.Placement{Backend: "docker", Spec: session.Spec{Network: "rath-other"}}, `placement.spec.network: "rath-other" is not allowed`},
		{session.Placement{Backend: "docker", Spec: session.Spec{Image: "alpine"}}, `placement.spec.image: "alpine" is not allowed`},
		{session.Placement{Backend: "docker", Spec: session.Spec{Entrypoint: []string{"sh"}}}, `placement.spec.entrypoint:`},
	} {
		run := r.run(t, r.placed(t, c.p), true)
		if run.Status != runs.RunFailed || !strings.Contains(run.Error, c.field) {
			t.Errorf("placement %+v: run %s (%s); want failed naming %s", c.p, run.Status, run.Error, c.field)
		}
		if a := run.Steps[0].Attempts; a != 1 {
			t.Errorf("placement %+v: %d attempts; want 1 (a refusal is permanent)", c.p, a)
		}
	}
	if n, m := r.local.opens(), r.docker.opens(); n+m != 0 {
		t.Fatalf("refused placements opened %d local and %d docker sandboxes", n, m)
	}

	// An unplaced session runs on the policy's default backend, and its
	// output stays unplaced.
	run := r.run(t, r.placed(t, session.Placement{}), true)
	if run.Status != runs.RunSucceeded || r.docker.opens() != 1 || r.local.opens() != 0 {
		t.Fatalf("unplaced: run %s (%s), %d docker and %d local opens; want it run on docker", run.Status, run.Error, r.docker.opens(), r.local.opens())
	}
	out, err := r.graph.Get(context.Background(), *run.Output)
	if err != nil || out.Placement.Backend != "" {
		t.Fatalf("unplaced output placement %+v, %v; want unplaced", out.Placement, err)
	}
}

// TestWorkerWithoutSandboxesRunsToollessSteps: a policy allowing no
// backend still runs steps without tools; a step with tools fails naming
// the missing default.
func TestWorkerWithoutSandboxesRunsToollessSteps(t *testing.T) {
	t.Parallel()
	none, err := policy.Parse([]byte("backends: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := newPolicyRig(t, none)
	in := r.placed(t, session.Placement{})
	if run := r.run(t, in, false); run.Status != runs.RunSucceeded {
		t.Fatalf("step without tools: %s (%s)", run.Status, run.Error)
	}
	if run := r.run(t, in, true); run.Status != runs.RunFailed || !strings.Contains(run.Error, "placement.backend: unplaced sessions have no default backend") {
		t.Fatalf("step with tools: %s (%s); want failed naming placement.backend", run.Status, run.Error)
	}
}
