package runs

import (
	"context"
	"slices"
	"testing"

	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/pgstore"
)

// TestStartReadsTheInput: a start that asks for its step's input reads it
// in the start's statement, alone and in a group, exactly as the graph
// reads it (the version, its chunks, its transcript), at the redaction
// epoch the statement read; a redacted input comes back redacted, with the
// epoch moved. An input with a base is not read so, and neither is one of
// a step the statement does not start.
func TestStartReadsTheInput(t *testing.T) {
	ctx := context.Background()
	url, _ := migratedPG(t)
	s, db := openRunStoreAt(t, url)
	g := openGraph(t, url)
	root, err := session.FromUserMessage(ctx, g, "read me with the start")
	if err != nil {
		t.Fatal(err)
	}
	child, err := root.Append(ctx, session.Assistant("a reply"))
	if err != nil {
		t.Fatal(err)
	}
	newStep := func(input session.ID) string {
		t.Helper()
		return createRun(t, s, input, 1, nil).Steps[0].ID
	}
	// want reads v as the graph does, uncached.
	want := func(id session.ID) (*session.Version, []session.Chunk) {
		t.Helper()
		v, tr, err := openGraph(t, url).VersionAndTranscript(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return v, tr
	}
	check := func(name string, in *pgstore.InputScan, id session.ID) {
		t.Helper()
		got, tr, ok, err := in.Version()
		if err != nil || !ok {
			t.Fatalf("%s: the input read with the start: ok %v, %v", name, ok, err)
		}
		wv, wt := want(id)
		if got.ID != wv.ID || got.Hash != wv.Hash || got.Len != wv.Len || got.Op != wv.Op ||
			!got.CreatedAt.Equal(wv.CreatedAt) || got.Producer != wv.Producer || !slices.Equal(got.Parents, wv.Parents) {
			t.Errorf("%s: version %+v, want %+v", name, got, wv)
		}
		if !slices.EqualFunc(tr, wt, func(a, b session.Chunk) bool {
			return string(a.Payload()) == string(b.Payload()) && a.Kind() == b.Kind()
		}) {
			t.Errorf("%s: transcript %v, want %v", name, tr, wt)
		}
		// Its hash is the one its content makes: what the graph verifies.
		if err := session.VerifyLinks(got, nil, nil); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}

	// Alone.
	var in pgstore.InputScan
	st, err := s.StartStepReadingInput(ctx, newStep(root.ID()), "w", &in)
	if err != nil {
		t.Fatal(err)
	}
	if !st.EpochKnown || st.Input != root.ID() {
		t.Fatalf("start: epoch known %v, input %s; want the epoch and %s", st.EpochKnown, st.Input, root.ID())
	}
	check("alone", &in, root.ID())
	epoch := st.RedactionEpoch

	// In a group, with a step whose input has a base and one that is not
	// started (its run canceled): only the first's input is read.
	gone := createRun(t, s, root.ID(), 1, nil)
	if _, err := s.Cancel(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	calls := []*startCall{
		{stepID: newStep(root.ID()), worker: "w", input: &pgstore.InputScan{}},
		{stepID: newStep(child.ID()), worker: "w", input: &pgstore.InputScan{}},
		{stepID: gone.Steps[0].ID, worker: "w", input: &pgstore.InputScan{}},
		{stepID: newStep(root.ID()), worker: "w"}, // did not ask
	}
	if err := s.startSteps(ctx, calls); err != nil {
		t.Fatal(err)
	}
	if !calls[0].ok || !calls[1].ok || calls[2].ok || !calls[3].ok {
		t.Fatalf("grouped starts: ok %v %v %v %v, want true true false true", calls[0].ok, calls[1].ok, calls[2].ok, calls[3].ok)
	}
	check("grouped", calls[0].input, root.ID())
	for i, c := range calls[1:3] {
		if _, _, ok, err := c.input.Version(); ok || err != nil {
			t.Errorf("grouped call %d: an input read: ok %v, %v; want none", i+1, ok, err)
		}
	}

	// Redacted: the start reads the marker, at the new epoch.
	if _, err := (lineage.Retention{DB: db, Dialect: lineage.Postgres}).Redact(ctx, root.ID(), 0, "test"); err != nil {
		t.Fatal(err)
	}
	in = pgstore.InputScan{}
	st, err = s.StartStepReadingInput(ctx, newStep(root.ID()), "w", &in)
	if err != nil {
		t.Fatal(err)
	}
	if st.RedactionEpoch == epoch {
		t.Errorf("the epoch after a redaction: %d, unchanged", st.RedactionEpoch)
	}
	_, tr, _, err := in.Version()
	if err != nil || len(tr) != 1 || !tr[0].Redacted() {
		t.Fatalf("the redacted input read with the start: %v, %v; want its chunk redacted", tr, err)
	}
	check("redacted", &in, root.ID())
}
