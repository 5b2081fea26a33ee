package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/pkg/store/pgstore"
)

// adminURL returns the test server's superuser URL (see testdb.AdminURL).
func adminURL(t testing.TB) string { return testdb.AdminURL(t) }

func withDB(t testing.TB, admin, name string) string {
	t.Helper()
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal("RATH_TEST_DATABASE_URL does not parse")
	}
	u.Path = "/" + name
	return u.String()
}

var (
	templateOnce sync.Once
	templateErr  error
)

const templateDB = "rath_t_template_graph"

// ensureTemplate migrates a template database once per test binary, so each
// test clones a migrated schema instead of migrating.
func ensureTemplate(t testing.TB, admin string) {
	t.Helper()
	templateOnce.Do(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			templateErr = err
			return
		}
		defer conn.Close(ctx)
		// Another test binary may have left one behind: rebuild it, so the
		// template always has the current migrations.
		_, _ = conn.Exec(ctx, `DROP DATABASE IF EXISTS `+templateDB+` WITH (FORCE)`)
		if _, templateErr = conn.Exec(ctx, `CREATE DATABASE `+templateDB); templateErr != nil {
			return
		}
		s, err := pgstore.Open(ctx, withDB(t, admin, templateDB), pgstore.Options{Migrate: true})
		if err != nil {
			templateErr = err
			return
		}
		s.Close()
	})
	if templateErr != nil {
		t.Fatalf("template database: %v", templateErr)
	}
}

// newDB creates an empty database for one test (migrated when migrated is
// true, by cloning the template) and drops it at cleanup. It returns the
// database's URL.
func newDB(t testing.TB, migrated bool) string {
	t.Helper()
	admin := adminURL(t)
	ctx := context.Background()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "rath_t_" + hex.EncodeToString(b[:])
	create := `CREATE DATABASE ` + name
	if migrated {
		ensureTemplate(t, admin)
		create += ` TEMPLATE ` + templateDB
	}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connect to the test server: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, create); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), admin)
		if err != nil {
			t.Errorf("drop %s: %v", name, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	return withDB(t, admin, name)
}

// openStore returns a store on a fresh migrated database.
func openStore(t testing.TB, opts pgstore.Options) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), newDB(t, true), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
