package runs_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/store/pgstore"
	"github.com/rath-run/rath/pkg/store/pgstore/pgstoretest"
	"github.com/rath-run/rath/pkg/store/sqlitestore"
	"github.com/rath-run/rath/pkg/store/storetest"
)

// TestCommitStepVersion: a step's version and its record commit together
// (Postgres: CommitStepVersion in the version's batch; SQLite:
// CommitStepVersionExec in the version's write transaction); a replayed
// commit gets the first version back and leaves the record as it was; a
// canceled step's version is kept but the step stays canceled.
func TestCommitStepVersion(t *testing.T) {
	t.Parallel()
	backends(t, testCommitStepVersion)
}

func testCommitStepVersion(t *testing.T, url string) {
	ctx := context.Background()
	rs := open(t, url)
	g, _ := graphs.Load(url)
	var pg store.Store
	// commit is the backend's one-transaction commit; prune false says the
	// journal is empty.
	var commit func(stepID string, v *session.Version, prune bool) (*session.Version, runs.Run, error)
	switch g := g.(type) {
	case *pgstore.Store:
		pg = g
		commit = func(stepID string, v *session.Version, prune bool) (*session.Version, runs.Run, error) {
			if prune {
				return rs.CommitStepVersion(ctx, g, stepID, v)
			}
			return rs.CommitStepVersionNoJournal(ctx, g, stepID, v)
		}
	case *sqlitestore.Store:
		// The run store on the graph store's writer, as the dev stack
		// opens it.
		pg, rs = g, runs.NewStore(g.DB(), nil)
		commit = func(stepID string, v *session.Version, prune bool) (*session.Version, runs.Run, error) {
			return rs.CommitStepVersionExec(ctx, g, stepID, v, prune)
		}
	default:
		t.Fatalf("graph store %T", g)
	}

	r := newRun(t, rs, url)
	stepID := r.Steps[0].ID
	if _, err := rs.StartStep(ctx, stepID, "w1"); err != nil {
		t.Fatal(err)
	}
	in, err := session.Open(ctx, pg, r.Input)
	if err != nil {
		t.Fatal(err)
	}
	// The journal: the payload entries go with the commit; the ambiguous
	// and review entries stay, without their text.
	for _, e := range []runs.JournalEntry{
		{Round: 1, Kind: "reply", Data: []byte(`{"Content":"secret reply"}`)},
		{Round: 1, CallID: "c1", Kind: "start", Data: []byte(`{"tool":"t","arguments":"secret args"}`)},
		{Round: 1, CallID: "c1", Kind: "result", Data: []byte(`{"content":"secret result"}`)},
		{Round: 1, CallID: "c1", Kind: runs.JournalAmbiguous, Data: []byte(`{"round":1,"call_id":"c1","tool":"t","arguments":"secret args","worker":"w1"}`)},
		{Round: 1, CallID: "c1", Kind: runs.JournalReview, Data: []byte(`{"call_id":"c1","tool":"t","round":1,"decision":"skip","result":{"secret":1},"reason":"secret reason","by":"ann"}`)},
		{Round: 1, Kind: "round", Data: []byte(`{"snapshot":""}`)},
	} {
		if err := rs.AppendJournal(ctx, stepID, e); err != nil {
			t.Fatal(err)
		}
	}
	v := storetest.Prepare(t, in, stepID, session.Assistant("done"))
	got, run, err := commit(stepID, v, true)
	if err != nil || got.ID != v.ID || run.ID != r.ID || run.Status != runs.RunSucceeded || run.Output == nil || *run.Output != v.ID {
		t.Fatalf("CommitStepVersion = %v, %+v, %v; want %s and the run succeeded with it", got, run, err, v.ID)
	}
	stored, err := rs.Get(ctx, r.ID)
	if err != nil || stored.Status != runs.RunSucceeded || stored.Steps[0].Status != runs.StepCommitted ||
		stored.Steps[0].Output == nil || *stored.Steps[0].Output != v.ID || stored.Steps[0].FinishedAt == nil {
		t.Fatalf("stored run = %+v, %v; want it succeeded, its step committed with %s", stored, err, v.ID)
	}
	if byKey, err := pg.GetByKey(ctx, stepID); err != nil || byKey.ID != v.ID {
		t.Fatalf("version by key = %v, %v; want %s", byKey, err, v.ID)
	}
	es, err := rs.LoadJournal(ctx, stepID)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range es {
		kinds = append(kinds, e.Kind)
		if strings.Contains(string(e.Data), "secret") {
			t.Errorf("journal entry %s keeps text after the commit: %s", e.Kind, e.Data)
		}
	}
	slices.Sort(kinds)
	if got := strings.Join(kinds, ","); got != "ambiguous,review,round" {
		t.Errorf("journal kinds after the commit: %s, want ambiguous,review,round", got)
	}

	// The redelivered step's commit: the first version, the run as it was.
	again := storetest.Prepare(t, in, stepID, session.Assistant("done"))
	got, run, err = commit(stepID, again, true)
	if err != nil || got.ID != v.ID || run.Status != runs.RunSucceeded || *run.Output != v.ID {
		t.Fatalf("replayed CommitStepVersion = %v, %+v, %v; want %s again", got, run, err, v.ID)
	}

	// A step canceled while it ran: its version commits (versions are
	// never lost), the step stays canceled, the canceled run is returned.
	r2 := newRun(t, rs, url)
	if _, err := rs.StartStep(ctx, r2.Steps[0].ID, "w1"); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Cancel(ctx, r2.ID); err != nil {
		t.Fatal(err)
	}
	in2, err := session.Open(ctx, pg, r2.Input)
	if err != nil {
		t.Fatal(err)
	}
	_, run, err = commit(r2.Steps[0].ID, storetest.Prepare(t, in2, r2.Steps[0].ID, session.Assistant("done")), true)
	if err != nil || run.Status != runs.RunCanceled {
		t.Fatalf("commit of a canceled step = %+v, %v; want the run canceled", run, err)
	}
	if st, _ := rs.GetStep(ctx, r2.Steps[0].ID); st.Status != runs.StepCanceled || st.Output != nil {
		t.Fatalf("canceled step after the commit = %+v; want canceled with no output", st)
	}

	// NoJournal commits as CommitStepVersion does, without the prune
	// (the caller knows the journal is empty).
	r3 := newRun(t, rs, url)
	if _, err := rs.StartStep(ctx, r3.Steps[0].ID, "w1"); err != nil {
		t.Fatal(err)
	}
	in3, err := session.Open(ctx, pg, r3.Input)
	if err != nil {
		t.Fatal(err)
	}
	v3 := storetest.Prepare(t, in3, r3.Steps[0].ID, session.Assistant("done"))
	if got, run, err := commit(r3.Steps[0].ID, v3, false); err != nil || got.ID != v3.ID || run.Status != runs.RunSucceeded || run.Output == nil || *run.Output != v3.ID {
		t.Fatalf("CommitStepVersionNoJournal = %v, %+v, %v; want %s and the run succeeded with it", got, run, err, v3.ID)
	}
	if st, _ := rs.GetStep(ctx, r3.Steps[0].ID); st.Status != runs.StepCommitted || st.Output == nil || *st.Output != v3.ID {
		t.Fatalf("step after CommitStepVersionNoJournal = %+v; want committed with %s", st, v3.ID)
	}

	// A step that does not exist: reported as such.
	if _, _, err := commit("run_nope/0", storetest.Prepare(t, in2, "run_nope/0", session.Assistant("done")), true); !errors.Is(err, runs.ErrNotFound) {
		t.Fatalf("commit of an unknown step: %v, want ErrNotFound", err)
	}
}

// TestCommitStepVersionsGrouped: step commits that go in one commit group
// on Postgres (the group's step records one statement) each end as alone:
// the step committed with its version, the run succeeded with it, and the
// run as the commit returned it. A commit held in flight on an advisory
// lock makes the commits sent meanwhile queue behind it, so they go as
// one group when it is let go, as the stored rows show (one statement's
// rows share their transaction and command id).
func TestCommitStepVersionsGrouped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.Postgres(t)
	rs := open(t, url)
	g, err := pgstore.Open(ctx, url, pgstore.Options{GroupCommit: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })

	const n = 16
	steps := make([]string, n)
	runIDs := make([]string, n)
	vs := make([]*session.Version, n)
	for i := range n {
		r := newRun(t, rs, url)
		steps[i], runIDs[i] = r.Steps[0].ID, r.ID
		if _, err := rs.StartStep(ctx, steps[i], "w1"); err != nil {
			t.Fatal(err)
		}
		in, err := session.Open(ctx, g, r.Input)
		if err != nil {
			t.Fatal(err)
		}
		vs[i] = storetest.Prepare(t, in, steps[i], session.Assistant("done"))
	}

	// Hold the one group the store lets be in flight, on a session of
	// its own, so that it takes no member's lane.
	root, err := session.FromUserMessage(ctx, g, "held")
	if err != nil {
		t.Fatal(err)
	}
	release := pgstoretest.HoldGroup(t, g, root)

	var entered, wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		entered.Add(1)
		p := enteringPutter{g, entered.Done}
		wg.Go(func() {
			got, run, err := rs.CommitStepVersionNoJournal(ctx, p, steps[i], vs[i])
			switch {
			case err != nil:
				errs[i] = err
			case got.ID != vs[i].ID || run.ID != runIDs[i] || run.Status != runs.RunSucceeded || run.Output == nil || *run.Output != vs[i].ID:
				errs[i] = fmt.Errorf("committed %s and run %+v; want %s and run %s succeeded with it", got.ID, run, vs[i].ID, runIDs[i])
			}
		})
	}
	entered.Wait()
	release()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	var statements int
	if err := g.Pool().QueryRow(ctx, `SELECT count(DISTINCT (xmin::text, cmin::text)) FROM steps WHERE id = ANY($1) AND status = 'committed'`,
		steps).Scan(&statements); err != nil {
		t.Fatal(err)
	}
	if statements == n {
		t.Fatalf("%d commits queued behind a held group went in %d statements; want them grouped", n, statements)
	}
}

// enteringPutter calls entered as a commit reaches its store.
type enteringPutter struct {
	runs.VersionPutter
	entered func()
}

func (p enteringPutter) PutWith(ctx context.Context, v *session.Version, after ...pgstore.Stmt) (*session.Version, bool, error) {
	p.entered()
	return p.VersionPutter.PutWith(ctx, v, after...)
}

// TestStartStepCases: what StartStep decides on both stores, whichever path
// (Postgres' one statement or the general transaction) decides it.
func TestStartStepCases(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, url string) {
		ctx := context.Background()
		rs := open(t, url)

		// A run past its deadline times out instead of starting.
		past := time.Now().Add(-time.Second)
		late := runs.Run{ID: runs.NewRunID(), Queue: "default", Target: []byte(`{}`), Input: version(t, url), Deadline: &past}
		if err := rs.Create(ctx, &late, []runs.Step{{Input: late.Input}}); err != nil {
			t.Fatal(err)
		}
		if _, err := rs.StartStep(ctx, late.Steps[0].ID, "w"); !errors.Is(err, runs.ErrTerminal) {
			t.Fatalf("start past the deadline: %v, want ErrTerminal", err)
		}
		if got, _ := rs.Get(ctx, late.ID); got.Status != runs.RunTimedOut || got.Steps[0].Attempts != 0 {
			t.Fatalf("run past its deadline = %s, attempts %d; want timed_out, 0", got.Status, got.Steps[0].Attempts)
		}

		// A future deadline starts, and a waiting step never starts again.
		future := time.Now().Add(time.Hour)
		ok := runs.Run{ID: runs.NewRunID(), Queue: "default", Target: []byte(`{}`), Input: version(t, url), Deadline: &future}
		if err := rs.Create(ctx, &ok, []runs.Step{{Input: ok.Input}}); err != nil {
			t.Fatal(err)
		}
		st, err := rs.StartStep(ctx, ok.Steps[0].ID, "w")
		if err != nil || st.Status != runs.StepRunning || st.Attempts != 1 || st.RunID != ok.ID || st.Input != ok.Input {
			t.Fatalf("start before the deadline = %+v, %v", st, err)
		}
		if _, err := rs.WaitStep(ctx, ok.Steps[0].ID, ok.Input); err != nil {
			t.Fatal(err)
		}
		if _, err := rs.StartStep(ctx, ok.Steps[0].ID, "w"); !errors.Is(err, runs.ErrTerminal) {
			t.Fatalf("start of a waiting step: %v, want ErrTerminal", err)
		}
	})
}
