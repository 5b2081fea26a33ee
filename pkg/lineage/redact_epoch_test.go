package lineage_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/store/storeurl"
)

// TestRedactReachesOtherStores opens two stores on one database, as two
// processes would (each with its own cache), warms both caches with a
// transcript and its versions, and redacts through a third connection
// (rathctl redact --store): as soon as Redact returns, both stores serve
// the marker, never the erased text, without any purge (migration 00018's
// redaction epoch). The stores keep caching afterwards.
func TestRedactReachesOtherStores(t *testing.T) {
	ctx := context.Background()
	urls := map[string]string{"sqlite": "sqlite:" + filepath.Join(t.TempDir(), "rath.db")}
	if !testing.Short() {
		urls["postgres"] = testdb.Postgres(t)
	}
	const secret = "sk-live-EPOCH-777"
	for name, url := range urls {
		t.Run(name, func(t *testing.T) {
			open := func() store.Store {
				st := must[store.Store](t)(storeurl.Open(ctx, url, storeurl.Options{Migrate: true, Create: true}))
				t.Cleanup(func() { st.Close() })
				return st
			}
			a, b := open(), open()
			s := func(v session.Session, err error) session.Session {
				t.Helper()
				return must[session.Session](t)(v, err)
			}
			root := s(session.New(ctx, a, session.System("be brief")))
			leak := s(root.Append(ctx, session.User("my key is "+secret)))
			top := s(leak.Append(ctx, session.Assistant("noted")))

			holds := func(st store.Store) bool {
				t.Helper()
				tr := must[[]session.Chunk](t)(st.Transcript(ctx, top.ID()))
				v := must[*session.Version](t)(st.Get(ctx, leak.ID()))
				found := false
				for _, c := range append(tr, v.Chunks...) {
					found = found || strings.Contains(string(c.Payload()), secret)
				}
				return found
			}
			for _, st := range []store.Store{a, b} {
				if !holds(st) { // warms the cache
					t.Fatal("the transcript does not hold the secret before redaction")
				}
			}

			_, db := redactChunk1(t, url, top.ID())
			if name == "postgres" {
				// The roles stores connect as (00011) read the epoch;
				// without it their caches would serve nothing.
				for _, role := range []string{"rath_worker", "rath_coordinator"} {
					var e int64
					err := db.QueryRowContext(ctx, `SELECT epoch FROM redaction_epoch`).Scan(&e)
					if err != nil || e < 1 {
						t.Fatalf("epoch after a redaction: %d (%v)", e, err)
					}
					conn, err := db.Conn(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := conn.ExecContext(ctx, `SET ROLE `+role); err != nil {
						t.Fatalf("set role %s: %v", role, err)
					}
					if err := conn.QueryRowContext(ctx, `SELECT epoch FROM redaction_epoch`).Scan(&e); err != nil {
						t.Errorf("%s cannot read the redaction epoch: %v", role, err)
					}
					_, _ = conn.ExecContext(ctx, `RESET ROLE`)
					conn.Close()
				}
			}
			for i, st := range []store.Store{a, b} {
				if holds(st) {
					t.Errorf("store %d serves the erased text after Redact returned", i)
				}
				tr := must[[]session.Chunk](t)(st.Transcript(ctx, top.ID()))
				if !tr[1].Redacted() || tr[1].RedactionReason() != "leaked key" {
					t.Errorf("store %d: chunk 1 is not the marker: %s", i, tr[1].Payload())
				}
			}
		})
	}
}

// TestRedactReachesAStepStartedAfterIt: a worker reads its step's input
// with the redaction epoch its step start read in the same statement
// (runs.Step.RedactionEpoch, pgstore VersionAndTranscriptAt), not with a
// read of its own. A step started after a redaction therefore reads the
// marker even from a graph whose cache holds the erased text.
func TestRedactReachesAStepStartedAfterIt(t *testing.T) {
	ctx := context.Background()
	url := testdb.Postgres(t)
	const secret = "sk-live-START-4242"
	g := must[store.Store](t)(storeurl.Open(ctx, url, storeurl.Options{Migrate: true, Create: true}))
	t.Cleanup(func() { g.Close() })
	s := func(v session.Session, err error) session.Session {
		t.Helper()
		return must[session.Session](t)(v, err)
	}
	root := s(session.New(ctx, g, session.System("be brief")))
	leak := s(root.Append(ctx, session.User("my key is "+secret)))
	top := s(leak.Append(ctx, session.Assistant("noted")))
	type epochLoader interface {
		VersionAndTranscript(context.Context, session.ID) (*session.Version, []session.Chunk, error)
		VersionAndTranscriptAt(context.Context, session.ID, int64) (*session.Version, []session.Chunk, error)
	}
	l, ok := g.(epochLoader)
	if !ok {
		t.Fatalf("%T cannot take the epoch from its caller", g)
	}
	holds := func(t []session.Chunk) bool {
		for _, c := range t {
			if strings.Contains(string(c.Payload()), secret) {
				return true
			}
		}
		return false
	}
	if _, tr, err := l.VersionAndTranscript(ctx, top.ID()); err != nil || !holds(tr) { // warms the cache
		t.Fatalf("before the redaction: %v, secret held %v", err, holds(tr))
	}

	rs, db := redactChunk1(t, url, top.ID())
	r := runs.Run{ID: runs.NewRunID(), Queue: "default", Target: []byte(`{"name":"a"}`), Input: top.ID()}
	if err := rs.Create(ctx, &r, []runs.Step{{Input: top.ID()}}); err != nil {
		t.Fatal(err)
	}
	st, err := rs.StartStep(ctx, r.Steps[0].ID, "w1")
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	if err := db.QueryRowContext(ctx, `SELECT epoch FROM redaction_epoch`).Scan(&want); err != nil {
		t.Fatal(err)
	}
	if !st.EpochKnown || st.RedactionEpoch != want {
		t.Fatalf("StartStep read epoch %d (known %v), the database holds %d", st.RedactionEpoch, st.EpochKnown, want)
	}
	_, tr, err := l.VersionAndTranscriptAt(ctx, top.ID(), st.RedactionEpoch)
	if err != nil {
		t.Fatal(err)
	}
	if holds(tr) || !tr[1].Redacted() {
		t.Fatalf("a step started after the redaction read chunk 1 as %s", tr[1].Payload())
	}
}

// redactChunk1 redacts chunk 1 of id's transcript through a run store of
// its own on url (rathctl redact --store), which it returns open.
func redactChunk1(t *testing.T, url string, id session.ID) (*runs.Store, *sql.DB) {
	t.Helper()
	ctx := context.Background()
	rs, db, err := runs.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ret := lineage.Retention{DB: db, Dialect: must[lineage.Dialect](t)(lineage.DialectOf(url))}
	if _, err := ret.Redact(ctx, id, 1, "leaked key"); err != nil {
		t.Fatal(err)
	}
	return rs, db
}
