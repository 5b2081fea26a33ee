package sqlitestore_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/rath-run/rath/pkg/store/sqlitestore"
)

// helperMigrateEnv, when set, makes this test binary a helper process that
// migrates the database file it names and exits (see
// TestMigrateFromProcesses).
const helperMigrateEnv = "RATH_SQLITESTORE_MIGRATE_HELPER_PATH"

func TestMain(m *testing.M) {
	if path := os.Getenv(helperMigrateEnv); path != "" {
		os.Exit(helperMigrate(path))
	}
	os.Exit(m.Run())
}

func helperMigrate(path string) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := sqlitestore.Open(ctx, path, sqlitestore.Options{Migrate: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper migrate:", err)
		return 1
	}
	if err := st.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "helper close:", err)
		return 1
	}
	return 0
}
