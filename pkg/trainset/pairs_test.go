package trainset_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/trainset"
)

func label(t *testing.T, s session.Session, l trainset.Label) {
	t.Helper()
	c := must[session.Chunk](t)(trainset.LabelChunk(l))
	must[session.Session](t)(s.Append(context.Background(), c))
}

func score(x float64) *float64 { return &x }

// TestPairsFromBranches: one prompt forked into branches, labeled by
// score and by preference, one branch merged with another before its
// reply, and an unrelated labeled session: the pairs rank by the labels,
// share the fork point's prompt, never cross sessions, and carry
// provenance that verifies. Labels do not turn into trajectories.
func TestPairsFromBranches(t *testing.T) {
	ctx := context.Background()
	st, _ := openStore(t)
	root := must[session.Session](t)(session.New(ctx, st, session.System("solve"), session.User("2+2?")))
	br := func(answer string) session.Session {
		f := must[session.Session](t)(root.Fork(ctx))
		return step(t, f, "rollout", "solver", session.Assistant(answer))
	}
	good, bad := br("4"), br("5")
	// A branch that merged the bad one's evidence in, then answered.
	mid := br("let me think")
	merged := must[session.Session](t)(mid.Merge(ctx, bad))
	mergedEnd := step(t, merged, "rollout", "solver", session.User("final?"), session.Assistant("4, surely"))
	label(t, good, trainset.Label{Score: score(1), By: "verifier"})
	label(t, bad, trainset.Label{Score: score(0), By: "verifier"})
	label(t, mergedEnd, trainset.Label{Prefer: true, By: "ann"})
	other := must[session.Session](t)(session.New(ctx, st, session.User("3+3?")))
	otherEnd := step(t, other, "rollout", "solver", session.Assistant("6"))
	label(t, otherEnd, trainset.Label{Score: score(0.5)})

	var buf bytes.Buffer
	stats, err := trainset.Pairs(ctx, st, trainset.Selector{Run: "rollout"}, "", &buf)
	if err != nil {
		t.Fatal(err)
	}
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
	if stats.Labeled != 4 || len(pairs) != 3 {
		t.Fatalf("stats %+v, %d pairs, want 4 labeled ends and 3 pairs", stats, len(pairs))
	}
	type key struct{ c, r session.ID }
	got := map[key]trainset.Pair{}
	for _, p := range pairs {
		got[key{p.Provenance.Chosen.VersionID, p.Provenance.Rejected.VersionID}] = p
		if p.Provenance.PromptVersion != root.ID() || len(p.Prompt) != 2 || p.Prompt[1].Role != "user" {
			t.Errorf("prompt of %+v: %+v", p.Provenance, p.Prompt)
		}
		for _, id := range []session.ID{p.Provenance.Chosen.VersionID, p.Provenance.Rejected.VersionID, p.Provenance.PromptVersion} {
			if _, err := lineage.Verify(ctx, st, id); err != nil {
				t.Errorf("verify %s: %v", id, err)
			}
		}
		if p.Provenance.Chosen.VersionID == otherEnd.ID() || p.Provenance.Rejected.VersionID == otherEnd.ID() {
			t.Errorf("paired across sessions: %+v", p.Provenance)
		}
	}
	for _, want := range []key{{good.ID(), bad.ID()}, {mergedEnd.ID(), good.ID()}, {mergedEnd.ID(), bad.ID()}} {
		if _, ok := got[want]; !ok {
			t.Errorf("no pair chosen %s rejected %s", want.c, want.r)
		}
	}
	if p := got[key{good.ID(), bad.ID()}]; len(p.Chosen) != 1 || *p.Chosen[0].Content != "4" || *p.Rejected[0].Content != "5" {
		t.Errorf("good/bad pair: %+v / %+v", p.Chosen, p.Rejected)
	}
	// The merged branch's continuation holds what it merged in (the bad
	// branch's reply) and ends with its own reply.
	if p := got[key{mergedEnd.ID(), bad.ID()}]; *p.Chosen[len(p.Chosen)-1].Content != "4, surely" {
		t.Errorf("merged pair chosen: %+v", p.Chosen)
	}
	// Labels are not trajectories: the export still sees the four ends.
	recs, _ := export(t, st, trainset.Selector{}, trainset.Options{})
	for _, r := range recs {
		if r.Provenance.Run != "rollout" {
			t.Errorf("a label (or unlabeled root) exported as a trajectory: %+v", r.Provenance)
		}
	}
	if len(recs) != 4 {
		t.Errorf("%d trajectories, want 4", len(recs))
	}
}

func TestLabelChunkRoundTrip(t *testing.T) {
	if _, err := trainset.LabelChunk(trainset.Label{}); err == nil {
		t.Error("an empty label was accepted")
	}
	c := must[session.Chunk](t)(trainset.LabelChunk(trainset.Label{Score: score(0.25), By: "v"}))
	l, ok := trainset.LabelOf(c)
	if !ok || *l.Score != 0.25 || l.By != "v" {
		t.Errorf("LabelOf: %+v %v", l, ok)
	}
	if _, ok := trainset.LabelOf(must[session.Chunk](t)(session.Evidence(session.KindNote, map[string]any{"rath_label": "x"}))); ok {
		t.Error("a malformed label note read as a label")
	}
}
