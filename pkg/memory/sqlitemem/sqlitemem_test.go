package sqlitemem_test

import (
	"context"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/rath-run/rath/pkg/memory"
	"github.com/rath-run/rath/pkg/memory/memorytest"
	"github.com/rath-run/rath/pkg/memory/sqlitemem"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	memorytest.Run(t, func(t *testing.T) memory.Store {
		s, err := sqlitemem.Open(context.Background(), filepath.Join(t.TempDir(), sqlitemem.DefaultFile))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestInMemory(t *testing.T) {
	memorytest.Run(t, func(t *testing.T) memory.Store {
		s, err := sqlitemem.Open(context.Background(), ":memory:")
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestPersistsAcrossOpens is what `memory: local` relies on: a second
// process opening the same file sees the first one's items.
func TestPersistsAcrossOpens(t *testing.T) {
	ctx := context.Background()
	path := sqlitemem.DefaultPath(t.TempDir())
	s, err := sqlitemem.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Remember(ctx, "agent/x", memory.Write{URI: "memory://user/prefs/theme", Text: "dark theme at night", VersionID: "v1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := sqlitemem.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	hits, err := s2.Recall(ctx, "agent/x", memory.Query{Text: "night"})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 1 || hits[0].VersionID != "v1" || hits[0].Score <= 0 {
		t.Fatalf("after reopen: %+v", hits)
	}
}

func TestOpenBadPath(t *testing.T) {
	if _, err := sqlitemem.Open(context.Background(), ""); err == nil {
		t.Fatal("empty path accepted")
	}
	if _, err := sqlitemem.Open(context.Background(), "a?b"); err == nil {
		t.Fatal("path with '?' accepted")
	}
}

// TestConcurrentOpensOfAFreshFile is the race a coordinator and a worker
// started together ran into: two openers of a new memory.db both planned
// the migrations and the second failed ("table runs already exists").
// Opens take the migration lock beside the file, so both succeed.
func TestConcurrentOpensOfAFreshFile(t *testing.T) {
	ctx := context.Background()
	const rounds, openers = 10, 3
	for r := range rounds {
		path := filepath.Join(t.TempDir(), sqlitemem.DefaultFile)
		start := make(chan struct{})
		errs := make(chan error, openers)
		for range openers {
			go func() {
				<-start
				s, err := sqlitemem.Open(ctx, path)
				if err == nil {
					err = s.Close()
				}
				errs <- err
			}()
		}
		close(start)
		for range openers {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: concurrent open of a fresh file: %v", r, err)
			}
		}
	}
}
