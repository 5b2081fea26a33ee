package runs_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// BenchmarkList measures GET /v1/runs's query (a page of 100, newest
// first) over 2,000 runs of which every 10th waits (half of those on a
// review, each with a journal of 10 entries), with no filter and with
// ?status=waiting and ?status=needs_review: the cost of deriving
// needs_review in the query.
func BenchmarkList(b *testing.B) {
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
			g, _ := graphs.Load(url)
			s, err := session.FromUserMessage(ctx, g.(store.Store), "hi")
			if err != nil {
				b.Fatal(err)
			}
			for i := range 2000 {
				r := runs.Run{ID: runs.NewRunID(), Queue: "default", Target: []byte(`{"name":"a"}`), Input: s.ID()}
				if err := rs.Create(ctx, &r, []runs.Step{{Input: s.ID()}}); err != nil {
					b.Fatal(err)
				}
				if i%10 != 0 {
					continue
				}
				st := r.Steps[0].ID
				if _, err := rs.StartStep(ctx, st, "w"); err != nil {
					b.Fatal(err)
				}
				for round := range 10 {
					if err := rs.AppendJournal(ctx, st, runs.JournalEntry{Round: round, Kind: "reply", Data: []byte(`{}`)}); err != nil {
						b.Fatal(err)
					}
				}
				if i%20 == 0 {
					if _, err := rs.NeedsReview(ctx, st, 9, "c", "w", []byte(`{}`)); err != nil {
						b.Fatal(err)
					}
				} else if _, err := rs.WaitStep(ctx, st, s.ID()); err != nil {
					b.Fatal(err)
				}
			}
			for _, f := range []struct {
				name   string
				status runs.RunStatus
			}{{"all", ""}, {"waiting", runs.RunWaiting}, {"needs_review", runs.RunNeedsReview}} {
				b.Run(f.name, func(b *testing.B) {
					for range b.N {
						if _, err := rs.List(ctx, runs.ListParams{Limit: 100, Status: f.status}); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}
