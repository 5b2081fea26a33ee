package storetest

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// SQLiteShell returns a query runner that executes SQL through the sqlite3
// command-line shell on the database file at path, the way the docs tell a
// user to query the embedded store: rows come back with cells joined by "|"
// and SQL NULL printed as null. The shell's SQLite is the system's (3.40 on
// Debian 12), older than the driver's, so a query the docs show must run on
// both. The shell is required: a test that runs the docs' SQLite queries
// fails when it is not installed.
func SQLiteShell(t testing.TB, path, null string) func(q string) ([]string, error) {
	t.Helper()
	bin, err := exec.LookPath("sqlite3")
	if err != nil {
		t.Fatalf("the sqlite3 shell is required to check the docs' SQLite queries as a user runs them (apt-get install sqlite3): %v", err)
	}
	return func(q string) ([]string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "-batch", "-bail", "-noheader", "-separator", "|", "-nullvalue", null, "-readonly", path)
		cmd.Stdin = strings.NewReader(q)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("sqlite3 shell: %w: %s", err, strings.TrimSpace(errOut.String()))
		}
		if errOut.Len() > 0 {
			return nil, fmt.Errorf("sqlite3 shell: %s", strings.TrimSpace(errOut.String()))
		}
		text := strings.TrimRight(out.String(), "\n")
		if text == "" {
			return nil, nil
		}
		return strings.Split(text, "\n"), nil
	}
}
