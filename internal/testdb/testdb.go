// Package testdb gives tests their own Postgres database on the private
// cluster that `make test` starts (RATH_TEST_DATABASE_URL). Without that
// variable tests skip, unless RATH_REQUIRE_POSTGRES=1 (CI), where they fail.
package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// AdminURL returns the test cluster's superuser URL. Without one the test
// is skipped, or failed when RATH_REQUIRE_POSTGRES=1 (as in CI).
func AdminURL(t testing.TB) string {
	t.Helper()
	admin := os.Getenv("RATH_TEST_DATABASE_URL")
	if admin == "" {
		if os.Getenv("RATH_REQUIRE_POSTGRES") == "1" {
			t.Fatal("RATH_TEST_DATABASE_URL is unset but RATH_REQUIRE_POSTGRES=1: start Postgres with scripts/testpg.sh")
		}
		t.Skip("RATH_TEST_DATABASE_URL unset: run through `make test` for the Postgres tests")
	}
	return admin
}

// Postgres creates an empty database for t, dropped when t ends, and returns
// its URL.
func Postgres(t testing.TB) string {
	t.Helper()
	admin := AdminURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connect to test Postgres: %v", err)
	}
	defer conn.Close(ctx)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "rath_t_" + hex.EncodeToString(b)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Logf("drop test database %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("drop test database %s: %v", name, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("RATH_TEST_DATABASE_URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// AsRole returns dbURL with the store URL's role parameter set: a store
// opened on it sets that role on each connection (as a cluster's workers
// do with role=rath_worker).
func AsRole(t testing.TB, dbURL, role string) string {
	t.Helper()
	return WithParams(t, dbURL, "role", role)
}

// WithParams returns dbURL with each key of kv (key, value, key, value…)
// set as a query parameter: connection settings such as role, rath.tenant
// or password.
func WithParams(t testing.TB, dbURL string, kv ...string) string {
	t.Helper()
	if len(kv)%2 != 0 {
		t.Fatalf("testdb.WithParams: %d arguments, want key and value pairs", len(kv))
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for i := 0; i < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}
