package runs

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/pkg/store/pgstore"
	"github.com/rath-run/rath/pkg/store/storeurl"
)

// migratedPG returns the URL of a fresh, migrated test database and a
// connection to it (both closed when the test ends).
func migratedPG(t testing.TB) (string, *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	url := testdb.Postgres(t)
	st, err := storeurl.Open(ctx, url, storeurl.Options{Migrate: true, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return url, conn
}

// insertRoot stores a bare root version with id, for runs and steps to
// name as their input.
func insertRoot(t testing.TB, conn *pgx.Conn, id any) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), `INSERT INTO versions (id, op, len, own_count, parent_count, hash, lane, tenant, created_at)
		VALUES ($1, 'create', 0, 0, 0, repeat('a', 64), $1, 'default', now())`, id); err != nil {
		t.Fatal(err)
	}
}

// openRunStore returns a run store on a fresh migrated test database, its
// database handle, a connection of the test's own, and the id of a root
// version stored for runs to take as input.
func openRunStore(t *testing.T) (*Store, *sql.DB, *pgx.Conn, uuid.UUID) {
	t.Helper()
	url, conn := migratedPG(t)
	s, db := openRunStoreAt(t, url)
	input := uuid.New()
	insertRoot(t, conn, input)
	return s, db, conn, input
}

// createRun records a run of steps steps (ordinals from 0, each on input)
// in s.
func createRun(t testing.TB, s *Store, input uuid.UUID, steps int, deadline *time.Time) Run {
	t.Helper()
	r := Run{ID: NewRunID(), Queue: "q", Target: []byte(`{}`), Input: input, Deadline: deadline}
	ss := make([]Step, steps)
	for i := range ss {
		ss[i] = Step{Ordinal: i, Input: input}
	}
	if err := s.Create(context.Background(), &r, ss); err != nil {
		t.Fatal(err)
	}
	return r
}

// openRunStoreAt opens the run store at url (closed when the test ends).
func openRunStoreAt(t testing.TB, url string) (*Store, *sql.DB) {
	t.Helper()
	s, db, err := Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return s, db
}

// openGraph opens the graph store at url, with a cache of its own (closed
// when the test ends).
func openGraph(t testing.TB, url string) *pgstore.Store {
	t.Helper()
	g, err := pgstore.Open(context.Background(), url, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	return g
}
