package runs_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/rath-run/rath/internal/runs"
)

// TestJournal: entries are kept in order per step, re-recording an entry
// replaces it, steps do not see each other's, and an oversized entry is
// refused with the limit named. Same contract on SQLite and Postgres.
func TestJournal(t *testing.T) {
	backends(t, func(t *testing.T, url string) {
		ctx := context.Background()
		rs := open(t, url)
		add := func(step string, e runs.JournalEntry) {
			t.Helper()
			if err := rs.AppendJournal(ctx, step, e); err != nil {
				t.Fatal(err)
			}
		}
		add("s1", runs.JournalEntry{Round: 1, Kind: "reply", Worker: "w1", Data: []byte(`{"Content":"a"}`)})
		add("s1", runs.JournalEntry{Round: 1, CallID: "c1", Kind: "start", Worker: "w1", Data: []byte(`{}`)})
		add("s1", runs.JournalEntry{Round: 1, CallID: "c1", Kind: "result", Worker: "w1", Data: []byte(`{"content":"1"}`)})
		add("s1", runs.JournalEntry{Round: 1, CallID: "c1", Kind: "result", Worker: "w2", Data: []byte(`{"content":"2"}`)})
		add("s2", runs.JournalEntry{Round: 1, Kind: "reply", Worker: "w1", Data: []byte(`{}`)})
		es, err := rs.LoadJournal(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		if len(es) != 3 {
			t.Fatalf("got %d entries, want 3: %+v", len(es), es)
		}
		var got []string
		for _, e := range es {
			got = append(got, e.Kind+"/"+e.CallID+"/"+e.Worker+"/"+string(e.Data))
		}
		want := `reply//w1/{"Content":"a"} start/c1/w1/{} result/c1/w2/{"content":"2"}`
		if strings.Join(got, " ") != want {
			t.Fatalf("journal = %s\nwant %s", strings.Join(got, " "), want)
		}
		err = rs.AppendJournal(ctx, "s1", runs.JournalEntry{Round: 2, Kind: "reply", Data: make([]byte, 17<<20)})
		if err == nil || !strings.Contains(err.Error(), "limit") {
			t.Fatalf("oversized entry: got %v, want a limit error", err)
		}
	})
}

// TestJournalGroupedAppends: many appends at once (grouped on Postgres)
// each end as they would alone: every entry recorded once under its step,
// two writers of one entry both answered (the last write kept), and an
// entry the database refuses (a NUL byte in Postgres text) fails only its
// own append, whatever group it shared. An append whose context has
// ended fails.
func TestJournalGroupedAppends(t *testing.T) {
	backends(t, func(t *testing.T, url string) {
		ctx := context.Background()
		rs := open(t, url)
		const steps, rounds = 24, 6
		var wg sync.WaitGroup
		errs := make(chan error, steps*rounds+8)
		for i := range steps {
			wg.Go(func() {
				for r := range rounds {
					e := runs.JournalEntry{Round: r, Kind: "reply", Worker: "w", Data: fmt.Appendf(nil, `{"step":%d,"round":%d}`, i, r)}
					if err := rs.AppendJournal(ctx, fmt.Sprintf("s%d", i), e); err != nil {
						errs <- fmt.Errorf("step %d round %d: %w", i, r, err)
					}
				}
			})
		}
		for w := range 4 { // four writers of one entry, at once
			wg.Go(func() {
				e := runs.JournalEntry{Round: 1, Kind: "reply", Worker: fmt.Sprintf("w%d", w), Data: []byte(`{}`)}
				if err := rs.AppendJournal(ctx, "shared", e); err != nil {
					errs <- fmt.Errorf("shared writer %d: %w", w, err)
				}
			})
		}
		var refused error
		if strings.HasPrefix(url, "postgres") {
			wg.Go(func() {
				refused = rs.AppendJournal(ctx, "bad", runs.JournalEntry{Round: 1, Kind: "reply", Data: []byte("{\"a\":\"\x00\"}")})
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if strings.HasPrefix(url, "postgres") && refused == nil {
			t.Error("an entry with a NUL byte was recorded on Postgres")
		}
		for i := range steps {
			es, err := rs.LoadJournal(ctx, fmt.Sprintf("s%d", i))
			if err != nil {
				t.Fatal(err)
			}
			if len(es) != rounds {
				t.Fatalf("step %d: %d entries, want %d", i, len(es), rounds)
			}
			for r, e := range es {
				if want := fmt.Sprintf(`{"step":%d,"round":%d}`, i, r); e.Round != r || string(e.Data) != want {
					t.Errorf("step %d entry %d: round %d %s, want %s", i, r, e.Round, e.Data, want)
				}
			}
		}
		if es, err := rs.LoadJournal(ctx, "shared"); err != nil || len(es) != 1 {
			t.Errorf("shared entry: %d entries (%v), want 1", len(es), err)
		}
		if es, err := rs.LoadJournal(ctx, "bad"); err != nil || (strings.HasPrefix(url, "postgres") && len(es) != 0) {
			t.Errorf("refused entry: %d entries (%v), want none", len(es), err)
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := rs.AppendJournal(cctx, "late", runs.JournalEntry{Round: 1, Kind: "reply", Data: []byte(`{}`)}); err == nil {
			t.Error("an append with an ended context succeeded")
		}
	})
}
