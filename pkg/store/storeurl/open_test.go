package storeurl_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/storeurl"
)

func TestOpenSQLite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, u := range []string{"sqlite::memory:", "sqlite:" + filepath.Join(t.TempDir(), "sub", "r.db")} {
		st, err := storeurl.Open(ctx, u, storeurl.Options{Migrate: true, Create: true})
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		s, err := session.FromUserMessage(ctx, st, "hi")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := st.Get(ctx, s.ID()); err != nil || got.Hash != s.Hash() {
			t.Fatalf("%s: get = %v, %v", u, got, err)
		}
		st.Close()
	}
}

func TestOpenBadURLs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, u := range []string{"", "mysql://root:secret@host/db", "sqlite:", "nonsense"} {
		_, err := storeurl.Open(ctx, u, storeurl.Options{})
		if err == nil {
			t.Fatalf("open %q succeeded", u)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Fatalf("error quotes the password: %v", err)
		}
	}
	// Nothing listens on port 1: the store is unavailable, not broken.
	_, err := storeurl.Open(ctx, "postgres://rath:secret@127.0.0.1:1/rath?sslmode=disable&connect_timeout=2", storeurl.Options{})
	if !errors.Is(err, session.ErrUnavailable) {
		t.Fatalf("open on a closed port = %v, want ErrUnavailable", err)
	}
	if strings.Contains(err.Error(), "secret") {
		t.Fatalf("error quotes the password: %v", err)
	}
}

// A sqlite: URL naming a file that does not exist is an error naming the
// path, unless the caller creates stores; nothing is created on the way.
func TestOpenMissingSQLiteFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "nowhere", "rath.db")
	for _, opts := range []storeurl.Options{{}, {Migrate: true}} {
		_, err := storeurl.Open(ctx, "sqlite:"+path, opts)
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), path) {
			t.Fatalf("open missing file with %+v = %v, want an error naming %s", opts, err, path)
		}
	}
	if _, err := os.Stat(filepath.Dir(path)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("refused open left its directory behind: %v", err)
	}
	st, err := storeurl.Open(ctx, "sqlite:"+path, storeurl.Options{Migrate: true, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	st, err = storeurl.Open(ctx, "sqlite:"+path, storeurl.Options{})
	if err != nil {
		t.Fatalf("reopen the created file: %v", err)
	}
	st.Close()
	if err := storeurl.CheckExists("sqlite::memory:"); err != nil {
		t.Fatalf("in-memory store: %v", err)
	}
}
