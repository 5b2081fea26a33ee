package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/app/apptest"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// rerunStack is a dev stack with a recorded history: a user message, a
// step of the writer agent, a user append, a second step of the writer.
type rerunStack struct {
	d                     *app.Dev
	input, step1, app, o2 session.ID
	runs                  []string
}

func newRerunStack(t *testing.T) rerunStack {
	t.Helper()
	ctx := context.Background()
	d, err := app.StartDev(ctx, app.DevConfig{Dir: t.TempDir(), Addr: "127.0.0.1:0", Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	spec := json.RawMessage(`{"name":"writer","model":"scripted","script":["first draft","second draft"]}`)
	st := rerunStack{d: d}
	submit := func(req api.SubmitRequest) runs.Run {
		t.Helper()
		req.Agent = spec
		run, err := d.Coordinator.Submit(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, "run to end", func() bool {
			run, err = d.Backend.Runs.Get(ctx, run.ID)
			return err == nil && run.Status.Terminal()
		})
		if run.Status != runs.RunSucceeded || run.Output == nil {
			t.Fatalf("run ended %s: %s", run.Status, run.Error)
		}
		st.runs = append(st.runs, run.ID)
		return run
	}
	r1 := submit(api.SubmitRequest{Message: "write a poem"})
	st.input, st.step1 = r1.Input, *r1.Output
	var a store.Info
	okJSON(t, &a, "session", "append", st.step1.String(), "--user", "shorter please", "--server", d.URL)
	st.app = a.ID
	st.o2 = *submit(api.SubmitRequest{Session: a.ID.String()}).Output
	return st
}

// transcript returns a version's transcript as "kind:text" lines.
func (st rerunStack) transcript(t *testing.T, id session.ID) []string {
	t.Helper()
	var v struct {
		Transcript []session.Chunk `json:"transcript"`
	}
	okJSON(t, &v, "session", "show", id.String(), "--server", st.d.URL)
	var out []string
	for _, c := range v.Transcript {
		out = append(out, string(c.Kind())+":"+c.Text())
	}
	return out
}

// descendants lists the versions below id.
func (st rerunStack) descendants(t *testing.T, id session.ID) []session.ID {
	t.Helper()
	var rel struct {
		Versions []store.Relative `json:"versions"`
	}
	cl, err := client.New(st.d.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Do(context.Background(), "GET", sessionPath(id, "descendants")+"?depth=0", nil, &rel); err != nil {
		t.Fatal(err)
	}
	ids := make([]session.ID, 0, len(rel.Versions))
	for _, r := range rel.Versions {
		ids = append(ids, r.ID)
	}
	return ids
}

// TestRerunCommand records two steps with a user append between and reruns
// the path from the first version with another model (a different script):
// the new branch holds the new replies, the original is untouched.
func TestRerunCommand(t *testing.T) {
	t.Parallel()
	st := newRerunStack(t)
	original := st.transcript(t, st.o2)
	want := []string{"user:write a poem", "assistant:first draft", "user:shorter please", "assistant:second draft"}
	if !slices.Equal(original, want) {
		t.Fatalf("recorded transcript = %q, want %q", original, want)
	}
	before := map[session.ID][]session.ID{}
	for _, id := range []session.ID{st.step1, st.app, st.o2} {
		before[id] = st.descendants(t, id)
	}

	alt := filepath.Join(t.TempDir(), "alt.yaml")
	if err := os.WriteFile(alt, []byte("- alternative one\n- alternative two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var rep api.RerunReport
	okJSON(t, &rep, "rerun", st.o2.String(), "--from", st.input.String(), "--model", "scripted:"+alt, "--server", st.d.URL)
	if rep.Version != st.o2 || rep.From != st.input || len(rep.Steps) != 3 {
		t.Fatalf("report = %+v", rep)
	}
	for i, w := range []struct {
		orig   session.ID
		op     session.Op
		action string
	}{{st.step1, session.OpStep, rerunRan}, {st.app, session.OpAppend, rerunAppended}, {st.o2, session.OpStep, rerunRan}} {
		s := rep.Steps[i]
		if s.Original != w.orig || s.Op != w.op || s.Action != w.action || s.New == nil || *s.New == w.orig {
			t.Errorf("row %d = %+v, want %s %s %s", i, s, w.orig, w.op, w.action)
		}
		if w.action == rerunRan && (s.Run == "" || slices.Contains(st.runs, s.Run) || s.Agent != "writer" || s.Model != "scripted") {
			t.Errorf("row %d: run %q agent %q model %q; want a new run of writer on the scripted model", i, s.Run, s.Agent, s.Model)
		}
	}
	if rep.Head != *rep.Steps[2].New {
		t.Errorf("head %s, want the last new version %s", rep.Head, *rep.Steps[2].New)
	}
	got := st.transcript(t, rep.Head)
	want = []string{"user:write a poem", "assistant:alternative one", "user:shorter please", "assistant:alternative two"}
	if !slices.Equal(got, want) {
		t.Errorf("rerun transcript = %q, want %q", got, want)
	}
	var shown struct {
		Version store.Info `json:"version"`
	}
	okJSON(t, &shown, "session", "show", rep.Fork.String(), "--server", st.d.URL)
	if fork := shown.Version; fork.Op != session.OpFork || len(fork.Parents) != 1 || fork.Parents[0] != st.input {
		t.Errorf("fork = %+v, want op fork on %s", fork, st.input)
	}
	// The original branch is untouched: the same transcript, and no version
	// was added under any version of the path after the ancestor.
	if got := st.transcript(t, st.o2); !slices.Equal(got, original) {
		t.Errorf("original transcript after rerun = %q, want %q", got, original)
	}
	for id, ds := range before {
		if after := st.descendants(t, id); !slices.Equal(after, ds) {
			t.Errorf("descendants of %s: %v after rerun, %v before", id, after, ds)
		}
	}

	// Without --model the step's own spec (its run's target) runs again:
	// the scripted replies come out as recorded. Text output: the head and
	// the table.
	code, out, errOut := rathctl(t, "", "rerun", st.o2.String(), "--from", st.step1.String(), "--server", st.d.URL)
	if code != 0 || !strings.Contains(out, "new head") || !strings.Contains(out, "ORIGINAL") || !strings.Contains(errOut, "forked") {
		t.Fatalf("rerun (text): exit %d\n%s\n%s", code, out, errOut)
	}
	t.Logf("rathctl rerun:\n%s%s", errOut, out)
	head, err := session.ParseID(strings.Fields(strings.SplitN(out, "new head ", 2)[1])[0])
	if err != nil {
		t.Fatal(err)
	}
	if got := st.transcript(t, head); !slices.Equal(got, original) {
		t.Errorf("rerun with the recorded spec = %q, want %q", got, original)
	}
}

// TestRerunErrors checks rerun refuses, before writing anything, an
// ancestor off the path, unknown ids and a path it cannot re-execute.
func TestRerunErrors(t *testing.T) {
	t.Parallel()
	st := newRerunStack(t)
	// A merge on the path: a side branch off the append, merged into o2.
	var side, merge store.Info
	okJSON(t, &side, "session", "append", st.app.String(), "--assistant", "side note", "--server", st.d.URL)
	okJSON(t, &merge, "session", "merge", st.o2.String(), side.ID.String(), "--server", st.d.URL)
	unknown := session.NewID()
	inputBelow := st.descendants(t, st.input)

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{st.step1.String(), "--from", st.app.String()}, 1, "is not on the first-parent path of " + st.step1.String()},
		{[]string{merge.ID.String(), "--from", side.ID.String()}, 1, "only through a merge's second parent"},
		{[]string{unknown.String(), "--from", st.input.String()}, 4, "version " + unknown.String()},
		{[]string{st.o2.String(), "--from", unknown.String()}, 4, "--from " + unknown.String()},
		{[]string{st.o2.String(), "--from", st.o2.String()}, 2, "nothing to rerun"},
		{[]string{st.o2.String(), "--from", "nope"}, 2, "--from"},
		{[]string{"nope", "--from", st.input.String()}, 2, "nope"},
		{[]string{st.o2.String()}, 2, "--from ANCESTOR is required"},
		{[]string{merge.ID.String(), "--from", st.input.String()}, 1, "version " + merge.ID.String() + " (op merge) cannot be rerun yet"},
		// rathctl reads a scripted:FILE itself, before anything is written.
		{[]string{st.o2.String(), "--from", st.input.String(), "--model", "scripted:" + filepath.Join(t.TempDir(), "none.yaml")}, 1, "no such file"},
		// A model the dev stack's worker cannot resolve: the run fails.
		{[]string{st.o2.String(), "--from", st.input.String(), "--model", "gpt-unconfigured"}, 1, "no model provider configured"},
	} {
		code, _, errOut := rathctl(t, "", append(append([]string{"rerun"}, c.args...), "--server", st.d.URL)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("rerun %v: exit %d, stderr %q; want exit %d mentioning %q", c.args, code, errOut, c.code, c.want)
		}
	}
	// Refused plans wrote nothing: the input has no new fork. (The failed
	// --model run forked first; its branch is reported in the error.)
	after := st.descendants(t, st.input)
	if len(after) != len(inputBelow)+1 {
		t.Errorf("descendants of the input: %d before, %d after; want only the failed run's fork added", len(inputBelow), len(after))
	}
}

// TestRerunRunScriptedFile: rerun --run RUN --from STEP --model
// scripted:FILE reads FILE here and reruns the workflow with its replies
// as every agent's: the step before STEP keeps its committed output, STEP
// answers from FILE. A missing FILE fails before anything is submitted.
func TestRerunRunScriptedFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	d := apptest.Dev(t, dir)
	write := func(name, doc string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flow := write("poem.yaml", "agents:\n  poet:\n    model: scripted\n    script: [draft, tight]\nsteps:\n  - agent: poet\n  - agent: poet\n")
	other := write("other.yaml", "- other draft\n- other tight\n")
	var r api.Run
	okJSON(t, &r, "run", flow, "-m", "a poem", "--server", d.URL)
	cl, err := client.New(d.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	if r, err = cl.WaitRun(ctx, r.ID); err != nil || r.Status != api.RunSucceeded {
		t.Fatalf("run %s: %v %+v", r.ID, err, r)
	}
	if code, _, errOut := rathctl(t, "", "rerun", "--run", r.ID, "--from", "2", "--model", "scripted:"+filepath.Join(dir, "none.yaml"), "--server", d.URL); code == 0 || !strings.Contains(errOut, "none.yaml") {
		t.Errorf("rerun with a missing script file: exit %d, %q", code, errOut)
	}
	var nr api.Run
	okJSON(t, &nr, "rerun", "--run", r.ID, "--from", "2", "--model", "scripted:"+other, "--server", d.URL)
	if nr, err = cl.WaitRun(ctx, nr.ID); err != nil || nr.Status != api.RunSucceeded || len(nr.Steps) != 2 || nr.Output == nil {
		t.Fatalf("rerun %s: %v %+v", nr.ID, err, nr)
	}
	if *nr.Steps[0].Output != *r.Steps[0].Output {
		t.Errorf("step 1 output %s, want the original's %s (kept)", *nr.Steps[0].Output, *r.Steps[0].Output)
	}
	v, err := cl.Graph().Get(ctx, *nr.Output)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, c := range v.Chunks {
		texts = append(texts, c.Text())
	}
	// The version holds what its step added, after the kept draft.
	if got := strings.Join(texts, "|"); got != "other tight" || len(v.Parents) != 1 || v.Parents[0] != *r.Steps[0].Output {
		t.Errorf("rerun output %q after %v, want the other model's second reply after the kept draft %s", got, v.Parents, *r.Steps[0].Output)
	}
}
