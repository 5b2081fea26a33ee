package runs_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testdb"
)

// BenchmarkJournalRound measures the journal's cost per round of a tool
// step: one model reply (~1 KiB), one tool call's start and result
// (~2 KiB) and the round's end, in the three durable writes the loop
// makes (the round's end rides with the next reply). Reported per round (ns/op is one round).
func BenchmarkJournalRound(b *testing.B) {
	for _, backend := range []string{"sqlite", "postgres"} {
		b.Run(backend, func(b *testing.B) {
			var url string
			if backend == "sqlite" {
				url = "sqlite:" + filepath.Join(b.TempDir(), "rath.db")
			} else {
				url = testdb.Postgres(b)
			}
			rs := open(b, url)
			ctx := context.Background()
			reply := make([]byte, 1024)
			result := make([]byte, 2048)
			for i := range reply {
				reply[i] = 'a'
			}
			for i := range result {
				result[i] = 'b'
			}
			reply = append(append([]byte(`{"Content":"`), reply...), `"}`...)
			result = append(append([]byte(`{"content":"`), result...), `"}`...)
			b.ResetTimer()
			for i := range b.N {
				step := fmt.Sprintf("bench/%d", i/5)
				round := i%5 + 1
				// As the loop writes them: the last round's end with
				// the reply, the call's start, its result.
				for _, es := range [][]runs.JournalEntry{
					{{Round: round - 1, Kind: "round", Worker: "w", Data: []byte(`{"snapshot":""}`)},
						{Round: round, Kind: "reply", Worker: "w", Data: reply}},
					{{Round: round, CallID: "c", Kind: "start", Worker: "w", Data: []byte(`{"tool":"t","arguments":"{}"}`)}},
					{{Round: round, CallID: "c", Kind: "result", Worker: "w", Data: result}},
				} {
					if err := rs.AppendJournal(ctx, step, es...); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
