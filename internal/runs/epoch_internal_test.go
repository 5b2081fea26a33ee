package runs

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestStartReadsTheEpochOnceItCan: a store opened while its role cannot
// read the redaction epoch (here: a worker that opened before the
// coordinator migrated the schema, the table not there yet) starts steps
// without it, and reads it in the start statement once it can, after the
// next probe; it used to decide once, at Open, and read the epoch with a
// statement of its own for every step it ran thereafter.
func TestStartReadsTheEpochOnceItCan(t *testing.T) {
	ctx := context.Background()
	url, conn := migratedPG(t)
	if _, err := conn.Exec(ctx, `ALTER TABLE redaction_epoch RENAME TO redaction_epoch_later`); err != nil {
		t.Fatal(err)
	}
	s, _ := openRunStoreAt(t, url)
	now := time.Now()
	s.now = func() time.Time { return now }
	input := uuid.New()
	insertRoot(t, conn, input)

	start := func() Step {
		t.Helper()
		r := createRun(t, s, input, 1, nil)
		st, err := s.StartStep(ctx, r.Steps[0].ID, "w")
		if err != nil || st.Status != StepRunning {
			t.Fatalf("start = %+v, %v; want running", st, err)
		}
		return st
	}
	if st := start(); st.EpochKnown {
		t.Fatalf("start before the table exists: the epoch is known (%d)", st.RedactionEpoch)
	}
	if _, err := conn.Exec(ctx, `ALTER TABLE redaction_epoch_later RENAME TO redaction_epoch`); err != nil {
		t.Fatal(err)
	}
	if st := start(); st.EpochKnown {
		t.Fatal("the store asked again before epochReprobe passed")
	}
	now = now.Add(epochReprobe)
	if st := start(); !st.EpochKnown {
		t.Fatal("a start after the schema has the epoch and epochReprobe passed: the epoch is not read in the start")
	}
	now = now.Add(time.Hour)
	if _, err := conn.Exec(ctx, `ALTER TABLE redaction_epoch RENAME TO redaction_epoch_gone`); err != nil {
		t.Fatal(err)
	}
	// Once yes, never asked again: the start statement reads the table
	// (and here fails, which the general path reports).
	r := createRun(t, s, input, 1, nil)
	if _, err := s.StartStep(ctx, r.Steps[0].ID, "w"); err == nil {
		t.Fatal("the store asked again after a yes (the start did not read the renamed table)")
	}
}
