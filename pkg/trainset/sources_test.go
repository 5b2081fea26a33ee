package trainset_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/store/storeurl"
	"github.com/rath-run/rath/pkg/trainset"
)

func openURL(t *testing.T, url string) store.Store {
	t.Helper()
	st, err := storeurl.Open(context.Background(), url, storeurl.Options{Migrate: true, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func approval(t *testing.T, callID, decision string) session.Chunk {
	t.Helper()
	return must[session.Chunk](t)(session.Evidence(session.KindApproval,
		map[string]string{"call_id": callID, "tool": "rm", "decision": decision, "by": "ann"}))
}

func pairsOf(t *testing.T, st store.Store, opts trainset.PairOptions) ([]trainset.Pair, trainset.PairStats, string) {
	t.Helper()
	var buf bytes.Buffer
	stats, err := trainset.Pairs(context.Background(), st, trainset.Selector{Run: "rollout"}, opts, &buf)
	if err != nil {
		t.Fatal(err)
	}
	raw := buf.String()
	var pairs []trainset.Pair
	dec := json.NewDecoder(&buf)
	dec.DisallowUnknownFields()
	for dec.More() {
		var p trainset.Pair
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pairs = append(pairs, p)
	}
	return pairs, stats, raw
}

// TestPairsFromEachSource: one prompt forked into branches scored by a
// verifier and labeled by a person, one branch merging another before its
// reply; a second prompt whose branches' tool calls were approved or
// rejected, one branch merging the approved one; a third whose branches a
// rollout's selector chose among, one merging another. Every source makes its
// pairs and names itself; the prompt is the fork point even across the
// merges; --from keeps only the sources asked; provenance verifies; an
// unrelated session never pairs. On SQLite and Postgres.
func TestPairsFromEachSource(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		st, _ := openStore(t)
		testPairsFromEachSource(t, st)
	})
	t.Run("postgres", func(t *testing.T) {
		testPairsFromEachSource(t, openURL(t, testdb.Postgres(t)))
	})
}

func testPairsFromEachSource(t *testing.T, st store.Store) {
	ctx := context.Background()
	root := must[session.Session](t)(session.New(ctx, st, session.System("solve"), session.User("2+2?")))
	br := func(from session.Session, chunks ...session.Chunk) session.Session {
		f := must[session.Session](t)(from.Fork(ctx))
		return step(t, f, "rollout", "solver", chunks...)
	}
	good, bad := br(root, session.Assistant("4")), br(root, session.Assistant("5"))
	mid := br(root, session.Assistant("let me think"))
	merged := must[session.Session](t)(mid.Merge(ctx, bad))
	mergedEnd := step(t, merged, "rollout", "solver", session.User("final?"), session.Assistant("4, surely"))
	// The verifier's scores: good 1 > merged 0.5 > bad 0.
	label(t, good, trainset.Label{Score: score(1), By: trainset.VerifierBy})
	label(t, bad, trainset.Label{Score: score(0), By: trainset.VerifierBy})
	label(t, mergedEnd, trainset.Label{Score: score(0.5), By: trainset.VerifierBy})
	// A person's labels: merged preferred over bad (a preference beats a score).
	label(t, mergedEnd, trainset.Label{Prefer: true, By: "ann"})
	label(t, bad, trainset.Label{Score: score(0.9), By: "ann"})

	// Approvals: the same cleanup approved on one branch, rejected on another.
	root2 := must[session.Session](t)(session.New(ctx, st, session.User("clean up /tmp")))
	withCall := func(decision, reply string) []session.Chunk {
		return []session.Chunk{
			session.Assistant("removing", call("c1", "rm", `{"path":"/tmp/x"}`)),
			approval(t, "c1", decision),
			session.ToolResultChunk(session.ToolResult{ToolCallID: "c1", Name: "rm", Content: `{"` + decision + `":true}`}),
			session.Assistant(reply),
		}
	}
	approved := br(root2, withCall("approved", "cleaned")...)
	rejected := br(root2, withCall("rejected", "not allowed")...)
	mid2 := br(root2, session.Assistant("checking first"))
	merged2 := must[session.Session](t)(mid2.Merge(ctx, approved))
	merged2End := step(t, merged2, "rollout", "solver", session.User("done?"), session.Assistant("yes, cleaned"))
	// A rollout's selector chose x among x, y and z; z merged y before
	// its reply.
	root3 := must[session.Session](t)(session.New(ctx, st, session.User("name a prime")))
	x, y := br(root3, session.Assistant("7")), br(root3, session.Assistant("8"))
	midZ := br(root3, session.Assistant("hmm"))
	z := step(t, must[session.Session](t)(midZ.Merge(ctx, y)), "rollout", "solver", session.User("so?"), session.Assistant("9"))
	decision := step(t, root3, "rollout", "judge", must[session.Chunk](t)(session.Evidence(session.KindSelectorDecision, map[string]any{
		"selector": "judge", "candidates": []string{"x", "y", "z"}, "reply": "0", "choice": 0,
		"branches": []session.ID{x.ID(), y.ID(), z.ID()},
	})))
	// A selector loop's decision names no branches: no pairs.
	step(t, root3, "rollout", "router", must[session.Chunk](t)(session.Evidence(session.KindSelectorDecision, map[string]any{
		"selector": "router", "candidates": []string{"a", "b"}, "reply": "1", "choice": 1,
	})))
	// An unrelated session with a score never pairs.
	other := must[session.Session](t)(session.New(ctx, st, session.User("3+3?")))
	otherEnd := step(t, other, "rollout", "solver", session.Assistant("6"))
	label(t, otherEnd, trainset.Label{Score: score(0.5), By: trainset.VerifierBy})

	type key struct {
		src  trainset.PairSource
		c, r session.ID
	}
	want := map[key]session.ID{
		{trainset.FromScores, good.ID(), bad.ID()}:              root.ID(),
		{trainset.FromScores, good.ID(), mergedEnd.ID()}:        root.ID(),
		{trainset.FromScores, mergedEnd.ID(), bad.ID()}:         root.ID(),
		{trainset.FromLabels, mergedEnd.ID(), bad.ID()}:         root.ID(),
		{trainset.FromApproval, approved.ID(), rejected.ID()}:   root2.ID(),
		{trainset.FromApproval, merged2End.ID(), rejected.ID()}: root2.ID(),
		{trainset.FromSelector, x.ID(), y.ID()}:                 root3.ID(),
		{trainset.FromSelector, x.ID(), z.ID()}:                 root3.ID(),
	}
	pairs, stats, _ := pairsOf(t, st, trainset.PairOptions{})
	got := map[key]trainset.Pair{}
	for _, p := range pairs {
		k := key{p.Provenance.Source, p.Provenance.Chosen.VersionID, p.Provenance.Rejected.VersionID}
		if _, dup := got[k]; dup {
			t.Errorf("pair %+v written twice", k)
		}
		got[k] = p
		base, ok := want[k]
		if !ok {
			t.Errorf("unexpected pair %+v", k)
			continue
		}
		if p.Provenance.PromptVersion != base || p.Prompt[len(p.Prompt)-1].Role != "user" {
			t.Errorf("pair %+v: prompt %s %+v, want the fork point %s", k, p.Provenance.PromptVersion, p.Prompt, base)
		}
		for _, id := range []session.ID{p.Provenance.Chosen.VersionID, p.Provenance.Rejected.VersionID, p.Provenance.PromptVersion} {
			if _, err := lineage.Verify(ctx, st, id); err != nil {
				t.Errorf("verify %s: %v", id, err)
			}
		}
	}
	for k := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("no %s pair chosen %s rejected %s", k.src, k.c, k.r)
		}
	}
	if len(pairs) != len(want) || stats.Written != len(want) {
		t.Errorf("%d pairs (stats %+v), want %d", len(pairs), stats, len(want))
	}
	// Each pair carries what ranked it.
	if p := got[key{trainset.FromScores, good.ID(), mergedEnd.ID()}]; p.Provenance.ChosenLabel == nil || *p.Provenance.ChosenLabel.Score != 1 ||
		p.Provenance.RejectedLabel.By != trainset.VerifierBy || *p.Provenance.RejectedLabel.Score != 0.5 {
		t.Errorf("scores pair labels: %+v", p.Provenance)
	}
	if p := got[key{trainset.FromLabels, mergedEnd.ID(), bad.ID()}]; !p.Provenance.ChosenLabel.Prefer || p.Provenance.RejectedLabel.By != "ann" {
		t.Errorf("labels pair labels: %+v", p.Provenance)
	}
	// Across the merge: the continuation holds what it merged in, then its own reply.
	if p := got[key{trainset.FromScores, mergedEnd.ID(), bad.ID()}]; *p.Chosen[len(p.Chosen)-1].Content != "4, surely" || len(p.Chosen) != 4 {
		t.Errorf("merged pair chosen: %+v", p.Chosen)
	}
	p := got[key{trainset.FromApproval, merged2End.ID(), rejected.ID()}]
	if p.Provenance.ChosenApproval != "approved" || p.Provenance.RejectedApproval != "rejected" || p.Provenance.ChosenLabel != nil ||
		*p.Chosen[len(p.Chosen)-1].Content != "yes, cleaned" || *p.Rejected[len(p.Rejected)-1].Content != "not allowed" {
		t.Errorf("approval pair across the merge: %+v chosen %+v", p.Provenance, p.Chosen)
	}

	if p := got[key{trainset.FromSelector, x.ID(), z.ID()}]; p.Provenance.SelectorDecision == nil || *p.Provenance.SelectorDecision != decision.ID() ||
		*p.Rejected[len(p.Rejected)-1].Content != "9" || len(p.Rejected) != 4 || stats.Decisions != 1 {
		t.Errorf("selector pair across the merge: %+v rejected %+v (stats %+v)", p.Provenance, p.Rejected, stats)
	}
	// --from keeps the sources asked, and only those.
	for _, from := range [][]trainset.PairSource{{trainset.FromScores}, {trainset.FromLabels}, {trainset.FromApproval}, {trainset.FromSelector},
		{trainset.FromLabels, trainset.FromApproval}} {
		ps, _, _ := pairsOf(t, st, trainset.PairOptions{From: from})
		var names []string
		for _, p := range ps {
			names = append(names, string(p.Provenance.Source))
		}
		n := 0
		for k := range want {
			for _, f := range from {
				if k.src == f {
					n++
				}
			}
		}
		sort.Strings(names)
		for _, s := range names {
			ok := false
			for _, f := range from {
				ok = ok || trainset.PairSource(s) == f
			}
			if !ok {
				t.Errorf("--from %v made a %s pair", from, s)
			}
		}
		if len(ps) != n {
			t.Errorf("--from %v: %d pairs (%v), want %d", from, len(ps), names, n)
		}
	}
}

// TestPairsNeverExportARedactedBranch: a branch whose reply was redacted
// (rathctl redact) makes no pair and no trajectory under drop-record, and
// its text appears in neither under drop-chunk either.
func TestPairsNeverExportARedactedBranch(t *testing.T) {
	ctx := context.Background()
	st, url := openStore(t)
	_, db, err := runs.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ret := lineage.Retention{DB: db, Dialect: must[lineage.Dialect](t)(lineage.DialectOf(url))}
	root := must[session.Session](t)(session.New(ctx, st, session.User("2+2?")))
	br := func(chunks ...session.Chunk) session.Session {
		return step(t, must[session.Session](t)(root.Fork(ctx)), "rollout", "solver", chunks...)
	}
	secret := br(session.Assistant("SECRET-4"))
	plain := br(session.Assistant("5"))
	third := br(session.Assistant("maybe 4"))
	label(t, secret, trainset.Label{Score: score(1), By: trainset.VerifierBy})
	label(t, plain, trainset.Label{Score: score(0), By: trainset.VerifierBy})
	label(t, third, trainset.Label{Score: score(0.5), By: trainset.VerifierBy})
	if _, err := ret.Redact(ctx, secret.ID(), 1, "leaked"); err != nil {
		t.Fatal(err)
	}
	for _, policy := range []trainset.Redacted{trainset.DropRecord, trainset.DropChunk} {
		pairs, stats, raw := pairsOf(t, st, trainset.PairOptions{Redacted: policy})
		if strings.Contains(raw, "SECRET") || strings.Contains(raw, "rath_redacted") {
			t.Errorf("%s: the redacted reply reached a pair: %s", policy, raw)
		}
		for _, p := range pairs {
			if p.Provenance.Chosen.VersionID == secret.ID() || p.Provenance.Rejected.VersionID == secret.ID() {
				t.Errorf("%s: the redacted branch was paired: %+v", policy, p.Provenance)
			}
		}
		if len(pairs) != 1 || stats.Skipped != 2 {
			t.Errorf("%s: %d pairs, stats %+v; want third over plain only, 2 skipped", policy, len(pairs), stats)
		}
		var buf bytes.Buffer
		if _, err := trainset.Export(ctx, st, trainset.Selector{Run: "rollout"}, trainset.Options{Redacted: policy}, &buf); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(buf.String(), "SECRET") || strings.Contains(buf.String(), secret.ID().String()) {
			t.Errorf("%s: the redacted branch was exported as a trajectory: %s", policy, buf.String())
		}
	}
}

func TestParsePairSources(t *testing.T) {
	if got, err := trainset.ParsePairSources(nil); err != nil || fmt.Sprint(got) != "[labels scores approval selector]" {
		t.Errorf("default: %v %v", got, err)
	}
	if got, err := trainset.ParsePairSources([]string{"scores", " approval"}); err != nil || fmt.Sprint(got) != "[scores approval]" {
		t.Errorf("scores,approval: %v %v", got, err)
	}
	for _, bad := range [][]string{{"votes"}, {"scores", "scores"}, {""}} {
		if _, err := trainset.ParsePairSources(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
