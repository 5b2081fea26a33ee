package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// Run checks the whole store.Store contract, the session.Graph part
// included, on stores from open, which must return a new empty, migrated
// store each call and close it at cleanup.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	RunGraph(t, func(t *testing.T) session.Graph { return open(t) })

	t.Run("Lineage", func(t *testing.T) {
		t.Parallel()
		ctx, st := ctxFor(t), open(t)
		root := must(session.FromUserMessage(ctx, st, "root"))(t)
		a := must(root.Append(ctx, session.Assistant("a")))(t)
		f1 := must(a.Fork(ctx))(t)
		f2 := must(a.Fork(ctx))(t)
		b1 := must(f1.Append(ctx, session.User("b1")))(t)
		m := must(b1.Merge(ctx, f2))(t)
		det := must(m.Detach(ctx))(t)

		kids := must(st.Children(ctx, a.ID()))(t)
		if len(kids) != 2 || kids[0].ID != f1.ID() || kids[1].ID != f2.ID() || kids[0].Op != session.OpFork {
			t.Fatalf("children of a = %+v, want forks %s, %s", kids, f1.ID(), f2.ID())
		}
		if kids := must(st.Children(ctx, f2.ID()))(t); len(kids) != 1 || kids[0].ID != m.ID() || len(kids[0].Parents) != 2 {
			t.Fatalf("children of f2 = %+v, want the merge", kids)
		}
		anc := must(st.Ancestors(ctx, m.ID(), 0))(t)
		want := []struct {
			id    session.ID
			depth int
		}{{b1.ID(), 1}, {f2.ID(), 1}, {f1.ID(), 2}, {a.ID(), 2}, {root.ID(), 3}} // ties: newest first
		if len(anc) != len(want) {
			t.Fatalf("ancestors of merge = %+v, want %d", anc, len(want))
		}
		for i, w := range want {
			if anc[i].ID != w.id || anc[i].Depth != w.depth {
				t.Fatalf("ancestors[%d] = %s depth %d, want %s depth %d (all %+v)", i, anc[i].ID, anc[i].Depth, w.id, w.depth, anc)
			}
		}
		if lim := must(st.Ancestors(ctx, m.ID(), 1))(t); len(lim) != 2 {
			t.Fatalf("ancestors at depth 1 = %+v, want 2", lim)
		}
		if none := must(st.Ancestors(ctx, det.ID(), 0))(t); len(none) != 0 {
			t.Fatalf("a detached root has lineage ancestors %+v", none)
		}
		desc := must(st.Descendants(ctx, root.ID(), 0))(t)
		wantDesc := map[session.ID]int{a.ID(): 1, f1.ID(): 2, f2.ID(): 2, b1.ID(): 3, m.ID(): 3}
		if len(desc) != len(wantDesc) {
			t.Fatalf("descendants of root = %+v, want %v", desc, wantDesc)
		}
		for i, d := range desc {
			if wantDesc[d.ID] != d.Depth || (i > 0 && desc[i-1].Depth > d.Depth) {
				t.Fatalf("descendants of root = %+v, want %v nearest first", desc, wantDesc)
			}
		}
		if d := must(st.Descendants(ctx, root.ID(), 2))(t); len(d) != 3 {
			t.Fatalf("descendants to depth 2 = %+v, want 3", d)
		}
		for _, f := range []func() error{
			func() error { _, err := st.Children(ctx, session.NewID()); return err },
			func() error { _, err := st.Ancestors(ctx, session.NewID(), 0); return err },
			func() error { _, err := st.Descendants(ctx, session.NewID(), 0); return err },
			func() error { _, err := st.GetByKey(ctx, "no such key"); return err },
			func() error { _, _, err := st.CommonBase(ctx, session.NewID(), root.ID()); return err },
		} {
			wantErr(t, f(), session.ErrNotFound, "unknown id")
		}
	})

	t.Run("ListAndKeys", func(t *testing.T) {
		t.Parallel()
		ctx, st := ctxFor(t), open(t)
		var all []session.ID
		var roots []session.ID
		for i := range 5 {
			r := must(session.FromUserMessage(ctx, st, fmt.Sprint("root ", i)))(t)
			s := must(r.Extend(ctx, session.Extension{Chunks: []session.Chunk{session.Assistant("x")}, Key: fmt.Sprint("key-", i),
				Producer: session.Producer{Run: fmt.Sprint("run-", i%2)}}))(t)
			all = append(all, r.ID(), s.ID())
			roots = append(roots, r.ID())
		}
		var got []session.ID
		p := store.ListParams{Limit: 3}
		for pages := 0; ; pages++ {
			page := must(st.List(ctx, p))(t)
			for _, in := range page.Versions {
				got = append(got, in.ID)
			}
			if page.Next == "" {
				break
			}
			if pages > 10 {
				t.Fatal("list does not end")
			}
			p.After = page.Next
		}
		if fmt.Sprint(got) != fmt.Sprint(all) {
			t.Fatalf("list = %v, want %v", got, all)
		}
		page := must(st.List(ctx, store.ListParams{RootsOnly: true}))(t)
		if len(page.Versions) != len(roots) || page.Versions[0].ID != roots[0] || page.Next != "" {
			t.Fatalf("roots = %+v, want %v", page.Versions, roots)
		}
		if page := must(st.List(ctx, store.ListParams{Run: "run-1"}))(t); len(page.Versions) != 2 || page.Versions[0].Producer.Run != "run-1" || page.Versions[0].OwnChunks != 1 {
			t.Fatalf("run-1 = %+v", page.Versions)
		}
		if _, err := st.List(ctx, store.ListParams{After: "garbage"}); err == nil {
			t.Fatal("list with a bad cursor succeeded")
		}
		_, err := st.List(ctx, store.ListParams{Limit: store.MaxListLimit + 1})
		wantErr(t, err, session.ErrTooLarge, "list over the limit")
		v := must(st.GetByKey(ctx, "key-3"))(t)
		if v.ID != all[7] {
			t.Fatalf("get by key = %s, want %s", v.ID, all[7])
		}
	})

	t.Run("Tx", func(t *testing.T) {
		t.Parallel()
		ctx, st := ctxFor(t), open(t)
		var kept, lost session.ID
		err := st.Tx(ctx, func(ctx context.Context, tx store.TxStore) error {
			s := must(session.FromUserMessage(ctx, tx, "in tx"))(t)
			s = must(s.Append(ctx, session.Assistant("ok")))(t)
			kept = s.ID()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		sameChunks(t, "committed tx", must(st.Transcript(ctx, kept))(t), []session.Chunk{session.User("in tx"), session.Assistant("ok")})
		boom := errors.New("boom")
		err = st.Tx(ctx, func(ctx context.Context, tx store.TxStore) error {
			s := must(session.FromUserMessage(ctx, tx, "rolled back"))(t)
			lost = s.ID()
			if _, err := tx.Get(ctx, lost); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("tx error = %v, want boom", err)
		}
		_, err = st.Get(ctx, lost)
		wantErr(t, err, session.ErrNotFound, "version of a rolled-back tx")
		// A replayed key inside a tx resolves to the committed version.
		base := must(session.Open(ctx, st, kept))(t)
		first := must(base.Extend(ctx, session.Extension{Chunks: []session.Chunk{session.User("k")}, Key: "tx-key"}))(t)
		err = st.Tx(ctx, func(ctx context.Context, tx store.TxStore) error {
			b := must(session.Open(ctx, tx, kept))(t)
			again, err := b.Extend(ctx, session.Extension{Chunks: []session.Chunk{session.User("other")}, Key: "tx-key"})
			if err != nil {
				return err
			}
			if again.ID() != first.ID() {
				return fmt.Errorf("replay in tx gave %s, want %s", again.ID(), first.ID())
			}
			_, err = again.Append(ctx, session.User("after replay"))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	})

	t.Run("PutManyAndVerify", func(t *testing.T) {
		t.Parallel()
		ctx, st := ctxFor(t), open(t)
		stored := must(session.FromUserMessage(ctx, st, "stored"))(t)
		mem := session.NewMemoryGraph()
		must(mem.Put(ctx, stored.Version()))(t)
		s := session.Wrap(mem, stored.Version())
		var batch []*session.Version
		for i := range 20 {
			var err error
			if s, err = s.Extend(ctx, session.Extension{Chunks: []session.Chunk{session.User(fmt.Sprint(i)), session.Assistant("ok")}, Key: fmt.Sprint("bulk-", i)}); err != nil {
				t.Fatal(err)
			}
			batch = append(batch, s.Version())
			if i%5 == 4 {
				f := must(s.Fork(ctx))(t)
				batch = append(batch, f.Version())
			}
		}
		if err := st.PutMany(ctx, batch); err != nil {
			t.Fatal(err)
		}
		sameChunks(t, "bulk transcript", must(st.Transcript(ctx, s.ID()))(t), must(mem.Transcript(ctx, s.ID()))(t))
		wantErr(t, st.PutMany(ctx, batch[:1]), session.ErrConflict, "put many again")
		rep, err := st.Verify(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Versions != 1+len(batch) || rep.Chunks != 1+40 || rep.Edges != len(batch) || len(rep.Problems) != 0 {
			t.Fatalf("verify report %+v", rep)
		}
	})

	t.Run("BulkImport", func(t *testing.T) {
		t.Parallel()
		runBulkImport(t, open)
	})
}
