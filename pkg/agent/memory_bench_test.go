package agent_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/memory"
	"github.com/rath-run/rath/pkg/memory/memorytest"
	"github.com/rath-run/rath/pkg/memory/pgmem"
	"github.com/rath-run/rath/pkg/memory/sqlitemem"
	"github.com/rath-run/rath/pkg/session"
)

// BenchmarkCommitTranscript1000 measures [agent.CommitTranscript] (what
// commit: true and `rathctl memory commit` run) of a 1,000-chunk
// transcript (a system prompt, then alternating user and assistant turns of
// 8 to 24 Zipf words, about 75 KiB of text) into each backend. Every
// iteration commits a new version (the transcript plus one more turn), so
// each writes a new item into a namespace that grows by one item per
// iteration; the session lives in an in-memory graph.
func BenchmarkCommitTranscript1000(b *testing.B) {
	for _, bc := range []struct {
		name string
		open func(b *testing.B) memory.Store
	}{
		{"sqlite", func(b *testing.B) memory.Store {
			s, err := sqlitemem.Open(context.Background(), filepath.Join(b.TempDir(), "memory.db"))
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
		{"postgres", func(b *testing.B) memory.Store {
			s, err := pgmem.Open(context.Background(), testdb.Postgres(b))
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			st := bc.open(b)
			b.Cleanup(func() { _ = st.Close() })
			benchCommit(b, st)
		})
	}
}

func benchCommit(b *testing.B, st memory.Store) {
	ctx := context.Background()
	words := memorytest.Corpus(2000)
	chunks := []session.Chunk{session.System("You are a careful assistant.")}
	for i := 1; len(chunks) < 999; i++ {
		if i%2 == 1 {
			chunks = append(chunks, session.User(words[i].Text))
		} else {
			chunks = append(chunks, session.Assistant(words[i].Text))
		}
	}
	g := session.NewMemoryGraph()
	base, err := session.New(ctx, g, chunks...)
	if err != nil {
		b.Fatal(err)
	}
	var bytes int
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		out, err := base.Append(ctx, session.Assistant(words[1000+i%1000].Text+fmt.Sprintf(" turn%d", i)))
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		it, err := agent.CommitTranscript(ctx, st, "bench-commit", out, "bench")
		if err != nil {
			b.Fatal(err)
		}
		bytes = len(it.Text)
	}
	b.ReportMetric(float64(bytes)/1024, "KiB/item")
}
