package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// runBulkImport checks Store.Bulk through session.Import: a file larger
// than one import batch lands whole, with lanes that pass Verify across the
// batches; an import that fails late (a file cut mid-line) or a Bulk
// whose fn fails after writing stores nothing; a second import of the
// same file is a no-op.
func runBulkImport(t *testing.T, open func(t *testing.T) store.Store) {
	ctx := ctxFor(t)
	mem := session.NewMemoryGraph()
	s := must(session.New(ctx, mem, session.System("bulk")))(t)
	const n = 2100 // more than one import batch (2,000 versions)
	for i := 1; i < n; i++ {
		var err error
		if i%500 == 0 {
			side := must(s.Fork(ctx))(t)
			side = must(side.Append(ctx, session.User("side")))(t)
			s, err = s.Merge(ctx, side)
		} else {
			s, err = s.Append(ctx, session.User(fmt.Sprint("m", i)))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := session.Export(ctx, mem, s.ID(), &buf); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	root := mem.Versions()[0]

	// Failures late in the file store nothing of it.
	st := open(t)
	if _, err := session.Import(ctx, st, bytes.NewReader(data[:len(data)-20])); !errors.Is(err, session.ErrFormat) {
		t.Fatalf("import of a file cut mid-line: %v, want ErrFormat", err)
	}
	if _, err := st.Get(ctx, root.ID); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("the file's root after a failed import: %v, want ErrNotFound (nothing stored)", err)
	}
	errLate := errors.New("late failure")
	err := st.Bulk(ctx, func(ctx context.Context, tx session.BulkTx) error {
		if err := tx.PutBatch(ctx, []*session.Version{root}); err != nil {
			return err
		}
		if got, err := tx.Lookup(ctx, []session.ID{root.ID}, nil); err != nil || len(got) != 1 || got[0].Hash != root.Hash {
			t.Errorf("lookup inside the transaction = %v, %v; want the root just written", got, err)
		}
		return errLate
	})
	if !errors.Is(err, errLate) {
		t.Fatalf("bulk returned %v, want fn's error", err)
	}
	if _, err := st.Get(ctx, root.ID); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("root after a failed bulk: %v, want ErrNotFound", err)
	}

	// The whole file lands, and again is a no-op.
	for range 2 {
		got := must(session.Import(ctx, st, bytes.NewReader(data)))(t)
		if got.Hash() != s.Hash() {
			t.Fatalf("imported head hash %s, want %s", got.Hash(), s.Hash())
		}
	}
	sameChunks(t, "imported transcript", must(st.Transcript(ctx, s.ID()))(t), must(s.Chunks(ctx))(t))
	rep, err := st.Verify(ctx)
	if err != nil {
		t.Fatalf("verify: %v %+v", err, rep.Problems)
	}
	if rep.Versions != len(mem.Versions()) || len(rep.Problems) != 0 {
		t.Fatalf("verify report: %d versions, problems %v; want %d, none", rep.Versions, rep.Problems, len(mem.Versions()))
	}
}
