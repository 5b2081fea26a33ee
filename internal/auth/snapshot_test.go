package auth_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/auth"
	"github.com/rath-run/rath/pkg/session"
)

// TestPlacementSnapshotConfinedToTenant checks migration 00017 at the store
// seam: on a tenant's confined store, a version may name a workspace
// snapshot only if a version of that tenant already holds it. A worker's
// system connection records a fresh snapshot on acme's session; acme then
// forks and places its own versions on it, while umbrella naming the same
// id, or an id nobody holds, is refused as not found naming
// placement.snapshot, and writes nothing.
func TestPlacementSnapshotConfinedToTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sys, url := migrated(t)
	pools, err := auth.NewTenantPools(url, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pools.Close() })
	ga, _, err := pools.For(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	gb, _, err := pools.For(ctx, "umbrella")
	if err != nil {
		t.Fatal(err)
	}
	snap := strings.Repeat("5a", 32)

	// System work (a worker's step) records a snapshot no version holds yet.
	a, err := session.New(ctx, ga, session.User("acme's task"))
	if err != nil {
		t.Fatal(err)
	}
	onSys, err := session.Open(ctx, sys, a.ID())
	if err != nil {
		t.Fatal(err)
	}
	step, err := onSys.To(ctx, session.Placement{Backend: "local", Snapshot: snap})
	if err != nil {
		t.Fatalf("system connection recording a fresh snapshot: %v", err)
	}

	// Acme keeps its snapshot through a fork, and may place another of its
	// sessions on it.
	mine, err := session.Open(ctx, ga, step.ID())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mine.Fork(ctx); err != nil {
		t.Errorf("acme forking its own placed version: %v", err)
	}
	a2, err := session.New(ctx, ga, session.User("acme's second task"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a2.To(ctx, session.Placement{Snapshot: snap}); err != nil {
		t.Errorf("acme placing its session on its own snapshot: %v", err)
	}

	// Umbrella naming acme's snapshot, or one nobody holds: not found.
	b, err := session.New(ctx, gb, session.User("umbrella's task"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{snap, strings.Repeat("00", 32)} {
		_, err := b.To(ctx, session.Placement{Backend: "local", Snapshot: id})
		if !errors.Is(err, session.ErrNotFound) || !strings.Contains(err.Error(), "placement.snapshot") {
			t.Errorf("umbrella naming snapshot %s: %v, want not found naming placement.snapshot", id, err)
		}
	}
	var n int
	if err := sys.Pool().QueryRow(ctx, `SELECT count(*) FROM versions WHERE tenant = 'umbrella' AND placement->>'snapshot' IS NOT NULL`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("umbrella has %d placed versions, want 0", n)
	}
}
