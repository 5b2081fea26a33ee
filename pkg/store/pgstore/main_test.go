package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/rath-run/rath/pkg/store/pgstore"
)

// helperMigrateEnv, when set, makes this test binary a helper process that
// migrates the database it names and exits (see TestMigrateFromProcesses).
const helperMigrateEnv = "RATH_PGSTORE_MIGRATE_HELPER_URL"

func TestMain(m *testing.M) {
	if url := os.Getenv(helperMigrateEnv); url != "" {
		os.Exit(helperMigrate(url))
	}
	os.Exit(m.Run())
}

func helperMigrate(url string) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := pgstore.Open(ctx, url, pgstore.Options{Migrate: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper migrate:", err)
		return 1
	}
	st.Close()
	return 0
}
