// Package apptest starts Rath's embedded stack for the tests of the
// packages that serve it (the CLI, the API, the UI).
package apptest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/rath-run/rath/internal/app"
)

// Dev starts the embedded stack ([app.StartDev]) with one worker, its API
// on a free loopback port and its store the SQLite file rath.db in dir, and
// closes it when the test ends.
func Dev(t testing.TB, dir string) *app.Dev {
	t.Helper()
	d, err := app.StartDev(context.Background(), app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", Workers: 1, StoreURL: "sqlite:" + filepath.Join(dir, "rath.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}
