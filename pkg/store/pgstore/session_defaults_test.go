package pgstore_test

import (
	"context"
	"testing"
	"time"

	"net/url"

	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/store/pgstore"
)

// TestIdleTransactionsEnd checks that a transaction whose client went silent
// is ended by the server (ApplySessionDefaults), so its row locks cannot
// block a redelivered step's commit for hours; and that a URL's own setting
// wins.
func TestIdleTransactionsEnd(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, pgstore.Options{})
	var got string
	if err := s.Pool().QueryRow(ctx, "SHOW idle_in_transaction_session_timeout").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "30s" {
		t.Fatalf("idle_in_transaction_session_timeout = %q, want 30s", got)
	}

	u, err := url.Parse(newDB(t, true))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("idle_in_transaction_session_timeout", "200")
	u.RawQuery = q.Encode()
	short, err := pgstore.Open(ctx, u.String(), pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close()
	conn, err := short.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var pid int
	if err := conn.QueryRow(ctx, "BEGIN; SELECT pg_backend_pid()").Scan(&pid); err != nil {
		if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
	}
	// The client goes silent inside the transaction: the server ends the
	// session once the timeout passes.
	testenv.Eventually(t, 10*time.Second, "the idle transaction's session ended", func() bool {
		var n int
		if err := s.Pool().QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	if _, err := conn.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("a statement succeeded on a session the server ended")
	}
}
