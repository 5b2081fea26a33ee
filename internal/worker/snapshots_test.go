package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
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
	"github.com/rath-run/rath/pkg/sandbox/sandboxtest"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/tool/builtin"
	"github.com/rath-run/rath/pkg/workspace"
)

// wsRig is two workers on one embedded JetStream, each pulling its own
// queue so a test decides which worker runs a step, sharing the store and
// the workspace object store but nothing else (each has its own
// Snapshotter, hence its own caches, and its own temp parent dir).
type wsRig struct {
	bus     *bus.Bus
	graph   store.Store
	runs    *runs.Store
	tmp     [2]string
	inspect *workspace.Snapshotter
}

func newWSRig(t *testing.T, backends func() *sandbox.Registry) *wsRig {
	t.Helper()
	b, _, _ := bustest.NewWith(t, bustest.Options{InProcess: true})
	st, rs := openStores(t)
	r := &wsRig{bus: b, graph: st, runs: rs, inspect: snapshotter(t, b)}
	for i := range 2 {
		r.tmp[i] = sandboxtest.Dir(t)
		r.startWorker(t, i, backends())
	}
	return r
}

func snapshotter(t *testing.T, b *bus.Bus) *workspace.Snapshotter {
	t.Helper()
	s, err := workspace.New(workspace.JetStream(b.JetStream(), b.Workspaces()), workspace.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func queueOf(i int) string { return []string{"ws-a", "ws-b"}[i] }

func (r *wsRig) startWorker(t *testing.T, i int, backends *sandbox.Registry) {
	t.Helper()
	ctx := context.Background()
	cons, err := r.bus.Consumer(ctx, queueOf(i))
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(r.graph, r.runs, cons, r.bus, scriptedResolve, worker.Config{
		Name: "ws-worker-" + queueOf(i), Queue: queueOf(i), Slots: 2, MaxDeliver: r.bus.Config().MaxDeliver,
		FetchWait: 200 * time.Millisecond, ShutdownTimeout: 10 * time.Second, Logger: failureLog(t, queueOf(i)),
		Workspaces: &worker.SnapshotWorkspaces{
			Backends:  backends,
			Snapshots: snapshotter(t, r.bus),
			Dir:       r.tmp[i],
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
}

func localBackends() *sandbox.Registry { return sandbox.NewRegistry(local.New(local.Config{})) }

func call(name string, args map[string]string) llm.ScriptReply {
	b, _ := json.Marshal(args)
	return llm.ScriptReply{ToolCalls: []session.ToolCall{{Type: "function", Function: session.FunctionCall{Name: name, Arguments: string(b)}}}}
}

// step runs one scripted tool call on worker i and returns the output
// version and the tool's result.
func (r *wsRig) step(t *testing.T, i int, in session.ID, reply llm.ScriptReply) (session.Session, string) {
	t.Helper()
	ctx := context.Background()
	// The scripted model answers by how many assistant messages the
	// transcript already holds: pad the script past the earlier steps'.
	prior, err := session.Open(ctx, r.graph, in)
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := prior.Chunks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var script []llm.ScriptReply
	for _, c := range chunks {
		if c.Kind() == session.KindAssistant {
			script = append(script, llm.ScriptReply{Content: "(earlier step)"})
		}
	}
	spec := agent.Spec{
		Name: "files", Model: "scripted",
		Tools:  []string{builtin.WriteWorkspaceFile, builtin.ReadWorkspaceFile, builtin.RunShellCommand},
		Script: append(script, reply, llm.ScriptReply{Content: "done"}),
	}
	target, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	run := runs.Run{ID: runs.NewRunID(), Queue: queueOf(i), Target: target, Input: in}
	if err := r.runs.Create(ctx, &run, []runs.Step{{Input: in}}); err != nil {
		t.Fatal(err)
	}
	st := run.Steps[0]
	if _, err := r.bus.Publish(ctx, bus.Job{StepID: st.ID, RunID: run.ID, Queue: run.Queue, Input: in.String(), Target: target}, nil); err != nil {
		t.Fatal(err)
	}
	// 90 s: a step whose delivery is lost under load is redelivered after
	// the bus's 30 s ack wait, which is the system working as promised.
	testenv.Eventually(t, 90*time.Second, "run "+run.ID+" to end", func() bool {
		if run, err = r.runs.Get(ctx, run.ID); err != nil {
			t.Fatal(err)
		}
		return run.Status.Terminal()
	})
	if run.Status != runs.RunSucceeded || run.Output == nil {
		t.Fatalf("run %s: %s (%s)", run.ID, run.Status, run.Error)
	}
	out, err := session.Open(ctx, r.graph, *run.Output)
	if err != nil {
		t.Fatal(err)
	}
	if out.Version().Producer.Worker != "ws-worker-"+queueOf(i) {
		t.Fatalf("step ran on %q, want worker %d", out.Version().Producer.Worker, i)
	}
	var result string
	for _, c := range out.Version().Chunks {
		if tr, ok := c.ToolResult(); ok {
			result = tr.Content
		}
	}
	return out, result
}

// files restores a version's snapshot and returns its files' contents.
func (r *wsRig) files(t *testing.T, s session.Session) map[string]string {
	t.Helper()
	dir := t.TempDir()
	m, err := r.inspect.Restore(context.Background(), s.Placement().Snapshot, dir)
	if err != nil {
		t.Fatalf("restore %s: %v", s.ID(), err)
	}
	out := map[string]string{}
	for _, e := range m.Entries {
		if e.Type == workspace.TypeFile {
			b, err := os.ReadFile(filepath.Join(dir, e.Path))
			if err != nil {
				t.Fatal(err)
			}
			out[e.Path] = string(b)
		}
	}
	return out
}

func objectStoreBytes(t *testing.T, b *bus.Bus) uint64 {
	t.Helper()
	s, err := b.JetStream().Stream(context.Background(), "OBJ_"+bus.WorkspacesBucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Bytes
}

func emptyDir(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("%s: left behind %s", dir, e.Name())
	}
}

// TestWorkspaceTravelsAndForks is issue 6's "done when" for workspaces: a
// second step on another worker sees the first step's files, and a fork's
// branches change files independently.
func TestWorkspaceTravelsAndForks(t *testing.T) {
	t.Parallel()
	r := newWSRig(t, localBackends)
	ctx := context.Background()
	in, err := session.FromUserMessage(ctx, r.graph, "keep notes")
	if err != nil {
		t.Fatal(err)
	}

	// Step 1 on worker A writes a file.
	s1, res := r.step(t, 0, in.ID(), call(builtin.WriteWorkspaceFile, map[string]string{"path": "notes/todo.txt", "content": "from step 1"}))
	if !strings.Contains(res, "bytes_written") {
		t.Fatalf("write result %s", res)
	}
	snap1 := s1.Placement().Snapshot
	if workspace.ValidID(snap1) != nil || snap1 == "" {
		t.Fatalf("step 1 recorded snapshot %q", snap1)
	}

	// Step 2 on worker B reads it; the unchanged workspace writes nothing.
	before := objectStoreBytes(t, r.bus)
	s2, res := r.step(t, 1, s1.ID(), call(builtin.ReadWorkspaceFile, map[string]string{"path": "notes/todo.txt"}))
	if !strings.Contains(res, "from step 1") {
		t.Fatalf("worker B read %s, want the file worker A wrote", res)
	}
	if s2.Placement().Snapshot != snap1 {
		t.Errorf("unchanged workspace: snapshot %s, want %s", s2.Placement().Snapshot, snap1)
	}
	if after := objectStoreBytes(t, r.bus); after != before {
		t.Errorf("unchanged workspace grew the object store from %d to %d bytes", before, after)
	}

	// Fork: both branches share the snapshot, then change it apart, one on
	// each worker.
	forkA, err := s1.Fork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	forkB, err := s1.Fork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if forkA.Placement().Snapshot != snap1 || forkB.Placement().Snapshot != snap1 {
		t.Fatalf("forks do not share the parent's snapshot")
	}
	a, _ := r.step(t, 0, forkA.ID(), call(builtin.WriteWorkspaceFile, map[string]string{"path": "notes/todo.txt", "content": "branch A"}))
	b, _ := r.step(t, 1, forkB.ID(), call(builtin.WriteWorkspaceFile, map[string]string{"path": "b.txt", "content": "only in B"}))

	for _, tc := range []struct {
		name string
		s    session.Session
		want map[string]string
	}{
		{"parent", s1, map[string]string{"notes/todo.txt": "from step 1"}},
		{"branch A", a, map[string]string{"notes/todo.txt": "branch A"}},
		{"branch B", b, map[string]string{"notes/todo.txt": "from step 1", "b.txt": "only in B"}},
	} {
		got := r.files(t, tc.s)
		if len(got) != len(tc.want) {
			t.Errorf("%s: files %v, want %v", tc.name, got, tc.want)
		}
		for p, w := range tc.want {
			if got[p] != w {
				t.Errorf("%s: %s = %q, want %q", tc.name, p, got[p], w)
			}
		}
	}
	// Branch A reads its own file back on the other worker.
	_, res = r.step(t, 1, a.ID(), call(builtin.ReadWorkspaceFile, map[string]string{"path": "notes/todo.txt"}))
	if !strings.Contains(res, "branch A") {
		t.Errorf("branch A's next step read %s", res)
	}
	// Every step's temporary directory is gone.
	emptyDir(t, r.tmp[0])
	emptyDir(t, r.tmp[1])
}

// TestSnapshotWorkspacesHook drives the hook directly: restore, write,
// snapshot; a failed step leaves no snapshot and no directory; a missing
// snapshot is a permanent error.
func TestSnapshotWorkspacesHook(t *testing.T) {
	t.Parallel()
	b, _, _ := bustest.NewWith(t, bustest.Options{InProcess: true})
	tmp := sandboxtest.Dir(t)
	ws := &worker.SnapshotWorkspaces{
		Backends:  sandbox.NewRegistry(local.New(local.Config{})),
		Snapshots: snapshotter(t, b),
		Dir:       tmp,
	}
	ctx := context.Background()
	spec := session.Spec{}
	unplaced := &session.Version{}

	sb, done, err := ws.Open(ctx, unplaced)
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.WriteFile(ctx, "dir/a.txt", []byte("A"), 0o644); err != nil {
		t.Fatal(err)
	}
	p1, err := done(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if p1.Snapshot == "" || p1.Backend != "" {
		t.Fatalf("placement after a write: %+v", p1)
	}
	emptyDir(t, tmp)

	// The next step sees the file; a failed step's changes are dropped.
	placed := &session.Version{Placement: session.Placement{Backend: "local", Spec: spec, Snapshot: p1.Snapshot}}
	sb, done, err = ws.Open(ctx, placed)
	if err != nil {
		t.Fatal(err)
	}
	got, err := sb.ReadFile(ctx, "dir/a.txt", 0)
	if err != nil || string(got) != "A" {
		t.Fatalf("restored file: %q, %v", got, err)
	}
	if err := sb.WriteFile(ctx, "b.txt", []byte("lost"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := objectStoreBytes(t, b)
	if _, err := done(ctx, false); err != nil {
		t.Fatal(err)
	}
	if after := objectStoreBytes(t, b); after != before {
		t.Errorf("a failed step wrote %d bytes", after-before)
	}
	emptyDir(t, tmp)

	// A step that deletes every file records the empty workspace.
	sb, done, err = ws.Open(ctx, placed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"rm", "-r", "dir"}}); err != nil {
		t.Fatal(err)
	}
	p3, err := done(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if p3.Snapshot != "" || p3.Backend != "local" {
		t.Errorf("after deleting everything: %+v, want local with no snapshot", p3)
	}

	// A read-only directory left by a tool is still cleaned up.
	sb, done, err = ws.Open(ctx, placed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: "mkdir ro && touch ro/f && chmod 0555 ro"}); err != nil {
		t.Fatal(err)
	}
	p4, err := done(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := mustManifest(t, ws.Snapshots, p4.Snapshot).Lookup("ro"); !ok || e.Mode != 0o555 {
		t.Errorf("ro recorded as %+v", e)
	}
	emptyDir(t, tmp)

	// A snapshot that is not in the store fails the step for good.
	missing := &session.Version{Placement: session.Placement{Snapshot: strings.Repeat("0", 64)}}
	_, _, err = ws.Open(ctx, missing)
	if !errors.Is(err, workspace.ErrNotFound) {
		t.Fatalf("Open with a missing snapshot: %v, want ErrNotFound", err)
	}
	emptyDir(t, tmp)

	// An unknown backend names those available.
	_, _, err = ws.Open(ctx, &session.Version{Placement: session.Placement{Backend: "nope"}})
	if !errors.Is(err, sandbox.ErrBackendNotFound) || !strings.Contains(err.Error(), "local") {
		t.Fatalf("Open on an unknown backend: %v", err)
	}
}

func mustManifest(t *testing.T, s *workspace.Snapshotter, id string) *workspace.Manifest {
	t.Helper()
	m, err := s.Manifest(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// failureLog is a worker's debug log, kept in memory and printed only if
// t fails: what a worker did when a step took too long.
func failureLog(t *testing.T, name string) *slog.Logger {
	t.Helper()
	buf := &lockedBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- worker %s log:\n%s", name, buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// lockedBuffer is a bytes.Buffer safe for concurrent writers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
