package workspace_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/bus/bustest"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/storeurl"
	"github.com/rath-run/rath/pkg/workspace"
)

// fillWorkspace writes files files of size bytes each under dir, spread
// over 10 directories, with content derived from seed.
func fillWorkspace(b *testing.B, dir string, files, size int, seed uint64) {
	b.Helper()
	rng := rand.New(rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16)}))
	buf := make([]byte, size)
	for i := range files {
		d := filepath.Join(dir, fmt.Sprintf("dir%02d", i%10))
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		for j := range buf {
			buf[j] = byte(rng.Uint32())
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("file%04d.txt", i)), buf, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

func benchBus(b *testing.B) (*bus.Bus, workspace.Store) {
	b.Helper()
	bs, _, _ := bustest.NewWith(b, bustest.Options{InProcess: true})
	return bs, workspace.JetStream(bs.JetStream(), bs.Workspaces())
}

func newBenchSnapshotter(b *testing.B, st workspace.Store) *workspace.Snapshotter {
	return newBenchSnapshotterC(b, st, 0)
}

func newBenchSnapshotterC(b *testing.B, st workspace.Store, conc int) *workspace.Snapshotter {
	b.Helper()
	s, err := workspace.New(st, workspace.Config{Concurrency: conc})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkSnapshot1000Files snapshots a 1,000-file workspace (1 KiB per
// file, 10 directories) into the embedded JetStream object store:
//   - new: every file's content is new (1,000 blobs + the manifest stored);
//   - one-changed: one file changed since the base (1 blob + manifest);
//   - unchanged: equal to the base (hashing only, nothing stored).
func BenchmarkSnapshot1000Files(b *testing.B) {
	const files, size = 1000, 1024
	b.Run("new", func(b *testing.B) {
		bs, st := benchBus(b)
		s := newBenchSnapshotter(b, st)
		dir := b.TempDir()
		before := streamBytes(b, bs)
		b.SetBytes(files * size)
		for i := range b.N {
			b.StopTimer()
			fillWorkspace(b, dir, files, size, uint64(i+1))
			b.StartTimer()
			res, err := s.Snapshot(context.Background(), dir, "")
			if err != nil {
				b.Fatal(err)
			}
			if res.ObjectsWritten != files+1 {
				b.Fatalf("wrote %d objects, want %d", res.ObjectsWritten, files+1)
			}
		}
		b.ReportMetric(float64(streamBytes(b, bs)-before)/float64(b.N), "stored-B/op")
	})
	b.Run("one-changed", func(b *testing.B) {
		bs, st := benchBus(b)
		s := newBenchSnapshotter(b, st)
		dir := b.TempDir()
		fillWorkspace(b, dir, files, size, 1)
		base, err := s.Snapshot(context.Background(), dir, "")
		if err != nil {
			b.Fatal(err)
		}
		before := streamBytes(b, bs)
		b.ResetTimer()
		for i := range b.N {
			b.StopTimer()
			if err := os.WriteFile(filepath.Join(dir, "dir00", "file0000.txt"), fmt.Appendf(nil, "version %d", i), 0o644); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			res, err := s.Snapshot(context.Background(), dir, base.ID)
			if err != nil {
				b.Fatal(err)
			}
			if res.ObjectsWritten != 2 {
				b.Fatalf("wrote %d objects, want 2", res.ObjectsWritten)
			}
		}
		b.ReportMetric(float64(streamBytes(b, bs)-before)/float64(b.N), "stored-B/op")
	})
	b.Run("unchanged", func(b *testing.B) {
		bs, st := benchBus(b)
		s := newBenchSnapshotter(b, st)
		dir := b.TempDir()
		fillWorkspace(b, dir, files, size, 1)
		base, err := s.Snapshot(context.Background(), dir, "")
		if err != nil {
			b.Fatal(err)
		}
		before := streamBytes(b, bs)
		b.SetBytes(files * size)
		b.ResetTimer()
		for range b.N {
			res, err := s.Snapshot(context.Background(), dir, base.ID)
			if err != nil {
				b.Fatal(err)
			}
			if res.ID != base.ID || res.ObjectsWritten != 0 {
				b.Fatalf("unchanged snapshot wrote %d objects", res.ObjectsWritten)
			}
		}
		b.ReportMetric(float64(streamBytes(b, bs)-before)/float64(b.N), "stored-B/op")
	})
}

// BenchmarkRestore1000Files restores a 1,000-file workspace (1 KiB per
// file) from the embedded JetStream object store into an empty directory,
// as a worker that has never seen it does (no manifest cache), at the
// default concurrency (8) and at 32.
func BenchmarkRestore1000Files(b *testing.B) {
	const files, size = 1000, 1024
	_, st := benchBus(b)
	src := b.TempDir()
	fillWorkspace(b, src, files, size, 1)
	res, err := newBenchSnapshotter(b, st).Snapshot(context.Background(), src, "")
	if err != nil {
		b.Fatal(err)
	}
	for _, conc := range []int{workspace.DefaultConcurrency, 32} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			parent := b.TempDir()
			b.SetBytes(files * size)
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				s := newBenchSnapshotterC(b, st, conc)
				dst := filepath.Join(parent, fmt.Sprint(i))
				b.StartTimer()
				if _, err := s.Restore(context.Background(), res.ID, dst); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := os.RemoveAll(dst); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// BenchmarkFork100MBWorkspace forks a session whose version carries a
// 100 MB workspace snapshot (100 files of 1 MB) in the SQLite store, and
// measures what the fork adds to the JetStream object store: nothing
// (stored-B/op must be 0). The step variant then also restores the fork's
// workspace and snapshots it unchanged, as a step that touches no file does:
// still nothing stored.
func BenchmarkFork100MBWorkspace(b *testing.B) {
	const files, size = 100, 1 << 20
	ctx := context.Background()
	bs, st := benchBus(b)
	src := b.TempDir()
	fillWorkspace(b, src, files, size, 7)
	snap, err := newBenchSnapshotter(b, st).Snapshot(ctx, src, "")
	if err != nil {
		b.Fatal(err)
	}
	g, err := storeurl.Open(ctx, "sqlite:"+filepath.Join(b.TempDir(), "rath.db"), storeurl.Options{Migrate: true, Create: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = g.Close() })
	root, err := session.FromUserMessage(ctx, g, "work on the repo")
	if err != nil {
		b.Fatal(err)
	}
	placed, err := root.To(ctx, session.Placement{Backend: "local", Snapshot: snap.ID})
	if err != nil {
		b.Fatal(err)
	}

	b.Run("fork", func(b *testing.B) {
		before := streamBytes(b, bs)
		b.ResetTimer()
		for range b.N {
			f, err := placed.Fork(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if f.Placement().Snapshot != snap.ID {
				b.Fatal("fork lost the snapshot")
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(streamBytes(b, bs)-before)/float64(b.N), "stored-B/op")
	})
	b.Run("fork+restore+snapshot", func(b *testing.B) {
		parent := b.TempDir()
		before := streamBytes(b, bs)
		b.SetBytes(files * size)
		b.ResetTimer()
		for i := range b.N {
			f, err := placed.Fork(ctx)
			if err != nil {
				b.Fatal(err)
			}
			s := newBenchSnapshotter(b, st) // another worker: cold caches
			dir := filepath.Join(parent, fmt.Sprint(i))
			if _, err := s.Restore(ctx, f.Placement().Snapshot, dir); err != nil {
				b.Fatal(err)
			}
			res, err := s.Snapshot(ctx, dir, f.Placement().Snapshot)
			if err != nil {
				b.Fatal(err)
			}
			if res.ID != snap.ID || res.ObjectsWritten != 0 {
				b.Fatalf("unchanged fork workspace: id %s, %d objects written", res.ID, res.ObjectsWritten)
			}
			b.StopTimer()
			if err := os.RemoveAll(dir); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		b.StopTimer()
		b.ReportMetric(float64(streamBytes(b, bs)-before)/float64(b.N), "stored-B/op")
	})
}

// BenchmarkCheckpointRound is a tool round's workspace checkpoint as the
// step journal takes it (rathctl bench --tool-rounds): a small workspace
// (10 files of 1 KiB) in which one file was rewritten since the previous
// checkpoint, snapshotted with that checkpoint as its base (one blob and
// the manifest stored).
func BenchmarkCheckpointRound(b *testing.B) {
	_, st := benchBus(b)
	s := newBenchSnapshotter(b, st)
	dir := b.TempDir()
	fillWorkspace(b, dir, 10, 1024, 1)
	prev, err := s.Snapshot(context.Background(), dir, "")
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		if err := os.WriteFile(filepath.Join(dir, "bench.txt"), fmt.Appendf(nil, "round %d", i), 0o644); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		res, err := s.Snapshot(context.Background(), dir, prev.ID)
		if err != nil {
			b.Fatal(err)
		}
		if res.ObjectsWritten != 2 {
			b.Fatalf("wrote %d objects, want 2", res.ObjectsWritten)
		}
		prev = res
	}
}
