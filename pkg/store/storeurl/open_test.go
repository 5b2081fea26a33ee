package storeurl_test

import (
	"context"
	"errors"
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
		st, err := storeurl.Open(ctx, u, storeurl.Options{Migrate: true})
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
