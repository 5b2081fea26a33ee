package runs_test

import (
	"context"
	"strings"
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
