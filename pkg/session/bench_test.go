package session_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/rath-run/rath/pkg/session"
)

// longSession records a root holding n chunks in g.
func longSession(b *testing.B, g session.Graph, n int) session.Session {
	b.Helper()
	chunks := make([]session.Chunk, n)
	for i := range chunks {
		if i%2 == 0 {
			chunks[i] = session.User(fmt.Sprintf("question %d about the workspace", i))
		} else {
			chunks[i] = session.Assistant(fmt.Sprintf("answer %d with some detail", i))
		}
	}
	s, err := session.New(context.Background(), g, chunks...)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkFork shows fork cost is flat in session length: time and bytes
// allocated per fork must not grow with the chunk count.
func BenchmarkFork(b *testing.B) {
	for _, n := range []int{10, 10_000, 100_000} {
		b.Run(fmt.Sprintf("chunks=%d", n), func(b *testing.B) {
			ctx := context.Background()
			g := session.NewMemoryGraph()
			s := longSession(b, g, n)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := s.Fork(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppend measures appending one assistant chunk to a growing chain.
func BenchmarkAppend(b *testing.B) {
	ctx := context.Background()
	g := session.NewMemoryGraph()
	s := longSession(b, g, 1)
	c := session.Assistant("a reply of ordinary length, a sentence or two long.")
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if s, err = s.Append(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkChunkHash measures hashing one chunk of typical size.
func BenchmarkChunkHash(b *testing.B) {
	c := session.Assistant(fmt.Sprintf("%0512d", 7))
	b.SetBytes(int64(c.Size()))
	b.ReportAllocs()
	for b.Loop() {
		_ = c.Hash()
	}
}

// BenchmarkVersionHash measures sealing a step version with two chunks.
func BenchmarkVersionHash(b *testing.B) {
	v := &session.Version{
		ID: session.NewID(), Parents: []session.ID{session.NewID()}, Op: session.OpStep,
		Chunks: []session.Chunk{session.Assistant("thinking"), session.User("next")},
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = v.ComputeHash([]string{"ab"}, "ab")
	}
}
