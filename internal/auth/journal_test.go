package auth_test

import (
	"context"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/pgstore"
)

// TestStepJournalStaysWithItsStep attacks the step journal (migration
// 00024): a tenant's connection reads no other tenant's journal, and
// rath_worker records entries only for a step that is running. Before
// 00024 the table had neither row-level security nor grants (a worker
// logging in as rath_worker failed every step).
func TestStepJournalStaysWithItsStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, dbURL := migrated(t)
	openRuns := func(url string) *runs.Store {
		rs, db, err := runs.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return rs
	}
	owner := openRuns(dbURL)
	step := func(tenant string, running bool) string {
		st, err := pgstore.Open(ctx, asTenant(t, dbURL, tenant), pgstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		in, err := session.FromUserMessage(ctx, st, tenant+"'s input")
		if err != nil {
			t.Fatal(err)
		}
		r := runs.Run{ID: runs.NewRunID(), Queue: "q", Target: []byte(`{}`), Input: in.ID(), Kind: runs.KindAgent}
		if err := openRuns(asTenant(t, dbURL, tenant)).Create(ctx, &r, []runs.Step{{Ordinal: 0, Input: in.ID()}}); err != nil {
			t.Fatal(err)
		}
		if running {
			if _, err := owner.StartStep(ctx, r.Steps[0].ID, "w"); err != nil {
				t.Fatal(err)
			}
		}
		return r.Steps[0].ID
	}
	acme, umbrella, pending := step("acme", true), step("umbrella", true), step("umbrella", false)
	secret := runs.JournalEntry{Round: 1, Kind: "reply", Data: []byte(`{"content":"acme's secret reply"}`)}
	if err := owner.AppendJournal(ctx, acme, secret); err != nil {
		t.Fatal(err)
	}

	umbrellaConn := openRuns(asTenant(t, dbURL, "umbrella"))
	if es, err := umbrellaConn.LoadJournal(ctx, acme); err != nil || len(es) != 0 {
		t.Errorf("umbrella read acme's journal: %d entries, %v", len(es), err)
	}
	if err := umbrellaConn.AppendJournal(ctx, acme, runs.JournalEntry{Round: 1, Kind: "reply", Data: []byte(`{"content":"planted"}`)}); err == nil {
		t.Error("umbrella wrote into acme's journal")
	}
	if es, err := openRuns(asTenant(t, dbURL, "acme")).LoadJournal(ctx, acme); err != nil || len(es) != 1 || !strings.Contains(string(es[0].Data), "secret") {
		t.Errorf("acme reads its own journal: %+v, %v", es, err)
	}

	worker := openRuns(testdb.AsRole(t, dbURL, "rath_worker"))
	if err := worker.AppendJournal(ctx, umbrella, runs.JournalEntry{Round: 1, Kind: "reply", Data: []byte(`{}`)}); err != nil {
		t.Errorf("as rath_worker: journal of a running step: %v", err)
	}
	if err := worker.AppendJournal(ctx, pending, runs.JournalEntry{Round: 1, Kind: "reply", Data: []byte(`{}`)}); err == nil || !strings.Contains(err.Error(), "42501") {
		t.Errorf("as rath_worker: journal of a step that is not running: err = %v, want SQLSTATE 42501", err)
	}

	// As rath_worker, the step's commit on the fast path (the version and
	// the step's record in one transaction) prunes its journal: the
	// payload entries go, the review entries stay without their text.
	for _, e := range []runs.JournalEntry{
		{Round: 1, CallID: "c1", Kind: "result", Data: []byte(`{"content":"secret result"}`)},
		{Round: 1, CallID: "c1", Kind: runs.JournalReview, Data: []byte(`{"call_id":"c1","tool":"t","round":1,"decision":"skip","result":{"secret":1},"by":"ann"}`)},
	} {
		if err := worker.AppendJournal(ctx, umbrella, e); err != nil {
			t.Fatal(err)
		}
	}
	wg, err := pgstore.Open(ctx, testdb.AsRole(t, dbURL, "rath_worker"), pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = wg.Close() })
	st, err := owner.GetStep(ctx, umbrella)
	if err != nil {
		t.Fatal(err)
	}
	in, err := session.Open(ctx, wg, st.Input)
	if err != nil {
		t.Fatal(err)
	}
	var v *session.Version
	capture := captureGraph{Graph: in.Graph(), put: func(x *session.Version) { v = x }}
	if _, err := session.Wrap(capture, in.Version()).Extend(ctx, session.Extension{Op: session.OpStep, Key: umbrella,
		Chunks: []session.Chunk{session.Assistant("done")}, Producer: session.Producer{Run: st.RunID, Step: umbrella, Worker: "w"}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := worker.CommitStepVersion(ctx, wg, umbrella, v); err != nil {
		t.Fatalf("as rath_worker: commit: %v", err)
	}
	es, err := owner.LoadJournal(ctx, umbrella)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range es {
		kinds = append(kinds, e.Kind)
		if strings.Contains(string(e.Data), "secret") {
			t.Errorf("as rath_worker: journal entry %s keeps text after the commit: %s", e.Kind, e.Data)
		}
	}
	if strings.Join(kinds, ",") != runs.JournalReview {
		t.Errorf("as rath_worker: journal after the commit: %v, want the review entry only", kinds)
	}
}

// captureGraph records the version put into it instead of committing it:
// the step's commit path commits it.
type captureGraph struct {
	session.Graph
	put func(*session.Version)
}

func (g captureGraph) Put(_ context.Context, v *session.Version) (*session.Version, error) {
	g.put(v)
	return v, nil
}

// TestNeedsReviewListStaysWithItsTenant: the needs_review a run list
// derives from the step journal is the tenant's own: acme's connection
// lists its run as needs_review, umbrella's lists none of acme's runs
// under any filter and its own waiting run as waiting.
func TestNeedsReviewListStaysWithItsTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, dbURL := migrated(t)
	openRuns := func(url string) *runs.Store {
		rs, db, err := runs.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return rs
	}
	owner := openRuns(dbURL)
	running := func(tenant string) runs.Run {
		st, err := pgstore.Open(ctx, asTenant(t, dbURL, tenant), pgstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		in, err := session.FromUserMessage(ctx, st, tenant+"'s input")
		if err != nil {
			t.Fatal(err)
		}
		r := runs.Run{ID: runs.NewRunID(), Queue: "q", Target: []byte(`{}`), Input: in.ID(), Kind: runs.KindAgent}
		if err := openRuns(asTenant(t, dbURL, tenant)).Create(ctx, &r, []runs.Step{{Ordinal: 0, Input: in.ID()}}); err != nil {
			t.Fatal(err)
		}
		if _, err := owner.StartStep(ctx, r.Steps[0].ID, "w"); err != nil {
			t.Fatal(err)
		}
		return r
	}
	acme, umbrella := running("acme"), running("umbrella")
	if _, err := owner.NeedsReview(ctx, acme.Steps[0].ID, 1, "c1", "w", []byte(`{"tool":"send"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.WaitStep(ctx, umbrella.Steps[0].ID, umbrella.Input); err != nil {
		t.Fatal(err)
	}

	list := func(rs *runs.Store, st runs.RunStatus) string {
		t.Helper()
		got, err := rs.List(ctx, runs.ListParams{Status: st})
		if err != nil {
			t.Fatalf("list %q: %v", st, err)
		}
		var out []string
		for _, r := range got {
			name := map[string]string{acme.ID: "acme", umbrella.ID: "umbrella"}[r.ID]
			out = append(out, name+"="+string(r.Status))
		}
		return strings.Join(out, " ")
	}
	acmeConn, umbrellaConn := openRuns(asTenant(t, dbURL, "acme")), openRuns(asTenant(t, dbURL, "umbrella"))
	for _, c := range []struct {
		who    string
		rs     *runs.Store
		status runs.RunStatus
		want   string
	}{
		{"acme", acmeConn, "", "acme=needs_review"},
		{"acme", acmeConn, runs.RunNeedsReview, "acme=needs_review"},
		{"acme", acmeConn, runs.RunWaiting, ""},
		{"umbrella", umbrellaConn, "", "umbrella=waiting"},
		{"umbrella", umbrellaConn, runs.RunNeedsReview, ""},
		{"umbrella", umbrellaConn, runs.RunWaiting, "umbrella=waiting"},
	} {
		if got := list(c.rs, c.status); got != c.want {
			t.Errorf("%s lists %q: %q, want %q", c.who, c.status, got, c.want)
		}
	}
}
