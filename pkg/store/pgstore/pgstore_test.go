package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/pgstore"
	"github.com/rath-run/rath/pkg/store/storetest"
)

func TestAppendOnlyTriggers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t, pgstore.Options{})
	root, err := session.FromUserMessage(ctx, st, "keep me")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.Fork(ctx); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`UPDATE versions SET op = 'append'`,
		`DELETE FROM versions`,
		`TRUNCATE versions CASCADE`,
		`UPDATE chunks SET payload = '{"content":"changed"}'`,
		`DELETE FROM chunks`,
		`TRUNCATE chunks`,
		`UPDATE lineage SET ordinal = 1`,
		`DELETE FROM lineage`,
		`TRUNCATE lineage`,
	} {
		_, err := st.Pool().Exec(ctx, q)
		if err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: got %v, want the append-only refusal", q, err)
		}
	}
	got, err := st.GetUncached(ctx, root.ID())
	if err != nil || got.Hash != root.Hash() {
		t.Fatalf("root after refused writes: %v %v", got, err)
	}
	if _, err := st.Verify(ctx); err != nil {
		t.Fatal(err)
	}
}

func countRows(t *testing.T, st *pgstore.Store) (v, c, l int) {
	t.Helper()
	err := st.Pool().QueryRow(context.Background(),
		`SELECT (SELECT count(*) FROM versions), (SELECT count(*) FROM chunks), (SELECT count(*) FROM lineage)`).Scan(&v, &c, &l)
	if err != nil {
		t.Fatal(err)
	}
	return v, c, l
}

func TestForkWritesOneRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t, pgstore.Options{})
	chunks := make([]session.Chunk, 2000) // over CopyThreshold: the COPY path
	for i := range chunks {
		chunks[i] = session.User("line")
	}
	s, err := session.New(ctx, st, chunks...)
	if err != nil {
		t.Fatal(err)
	}
	v0, c0, l0 := countRows(t, st)
	f, err := s.Fork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v1, c1, l1 := countRows(t, st)
	if v1-v0 != 1 || c1-c0 != 0 || l1-l0 != 1 {
		t.Fatalf("fork wrote %d versions, %d chunks, %d edges; want 1, 0, 1", v1-v0, c1-c0, l1-l0)
	}
	d, err := f.Detach(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v2, c2, l2 := countRows(t, st)
	if v2-v1 != 1 || c2 != c1 || l2 != l1 {
		t.Fatalf("detach wrote %d versions, %d chunks, %d edges; want 1, 0, 0", v2-v1, c2-c1, l2-l1)
	}
	got, err := st.LoadTranscriptUncached(ctx, d.ID())
	if err != nil || len(got) != 2000 {
		t.Fatalf("detached transcript: %d chunks, %v", len(got), err)
	}
}

func TestMigrateTwiceAndConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := newDB(t, false) // empty: not cloned from the template
	const n = 4
	stores := make([]*pgstore.Store, n)
	for i := range stores {
		s, err := pgstore.Open(ctx, url, pgstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores[i] = s
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Migrate(ctx)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent migration %d: %v", i, err)
		}
	}
	s, err := session.FromUserMessage(ctx, stores[0], "after migrating")
	if err != nil {
		t.Fatal(err)
	}
	if err := stores[1].Migrate(ctx); err != nil {
		t.Fatalf("migrating again: %v", err)
	}
	if got, err := stores[2].Get(ctx, s.ID()); err != nil || got.Hash != s.Hash() {
		t.Fatalf("version after re-migrating: %v %v", got, err)
	}
	var applied int
	if err := stores[0].Pool().QueryRow(ctx, `SELECT count(*) FROM goose_db_version WHERE version_id > 0`).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	if applied < 2 {
		t.Fatalf("goose recorded %d migrations, want at least 2", applied)
	}
}

// TestMigrateFromProcesses: separate processes migrating one empty database
// at once take turns on goose's lock; each migration is applied once.
func TestMigrateFromProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := newDB(t, false)
	storetest.RunHelpers(t, 3, helperMigrateEnv+"="+url)
	st, err := pgstore.Open(ctx, url, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var applied, distinct int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*), count(DISTINCT version_id) FROM goose_db_version WHERE version_id > 0 AND is_applied`).Scan(&applied, &distinct); err != nil {
		t.Fatal(err)
	}
	if applied != distinct || applied < 5 {
		t.Fatalf("goose recorded %d applications of %d migrations, want each once and at least 5", applied, distinct)
	}
	if _, err := session.FromUserMessage(ctx, st, "migrated by others"); err != nil {
		t.Fatal(err)
	}
}

func TestDatabaseDownAndBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := newDB(t, true)
	host := strings.SplitN(strings.TrimPrefix(dbURL, "postgres://"), "/", 2)[0]
	host = host[strings.Index(host, "@")+1:]
	px := testenv.NewProxy(t, host)
	st, err := pgstore.Open(ctx, strings.Replace(dbURL, host, px.Addr(), 1), pgstore.Options{CachedVersions: -1, CachedTranscripts: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err := session.FromUserMessage(ctx, st, "committed before the outage")
	if err != nil {
		t.Fatal(err)
	}
	px.Cut()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	during := session.Extension{Op: session.OpStep, Key: "step-during-outage", Chunks: []session.Chunk{session.Assistant("during the outage")}}
	_, err = s.Extend(cctx, during)
	if !errors.Is(err, session.ErrUnavailable) {
		t.Fatalf("append while down = %v, want ErrUnavailable", err)
	}
	_, err = st.Get(cctx, s.ID())
	if !errors.Is(err, session.ErrUnavailable) {
		t.Fatalf("get while down = %v, want ErrUnavailable", err)
	}
	px.Heal()
	// The pool reconnects; poll until it does, with a deadline.
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := st.Get(ctx, s.ID())
		if err == nil {
			if got.Hash != s.Hash() {
				t.Fatalf("after restart: hash %s, want %s", got.Hash, s.Hash())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("store did not recover: %v", err)
		}
	}
	// The step that failed during the outage is retried with its key: it
	// commits once, and a second retry returns the same version.
	first, err := s.Extend(ctx, during)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Extend(ctx, during)
	if err != nil || again.ID() != first.ID() {
		t.Fatalf("second retry = %v %v, want the committed %s", again.ID(), err, first.ID())
	}
	if _, err := first.Append(ctx, session.Assistant("after the outage")); err != nil {
		t.Fatal(err)
	}
	if rep, err := st.Verify(ctx); err != nil || rep.Versions != 3 {
		t.Fatalf("verify after the outage: %+v %v, want 3 versions", rep, err)
	}
	// A closed store is unavailable, not a panic.
	st.Close()
	if _, err := st.Get(ctx, s.ID()); !errors.Is(err, session.ErrUnavailable) {
		t.Fatalf("get on a closed store = %v, want ErrUnavailable", err)
	}
}
