// Package storeurl opens a Session Graph store from a URL:
//
//	postgres://user@host:5432/db?sslmode=disable   the Postgres store (also postgresql://)
//	sqlite:path/to/rath.db                         the embedded store, in a file
//	sqlite::memory:                                the embedded store, in memory
//
// It lives apart from package store so that the contract does not import
// its implementations.
package storeurl

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/store/pgstore"
	"github.com/rath-run/rath/pkg/store/sqlitestore"
)

// Options apply to whichever store the URL names.
type Options struct {
	// Migrate applies the embedded migrations on open.
	Migrate bool
	// Create lets a sqlite: URL name a file that does not exist yet: it is
	// created, with its directory. Without it, a missing file is an error
	// naming the path (matching fs.ErrNotExist), so a command run from the
	// wrong directory cannot silently answer from a new, empty store. Only
	// what sets a store up (rathctl dev, migrate and demo, a coordinator
	// that migrates) creates one.
	Create bool
}

// SQLitePath is the file a sqlite: URL names ("" and false for any other
// URL, and for an empty path). sqlite::memory: gives ":memory:".
func SQLitePath(rawURL string) (string, bool) {
	if !strings.HasPrefix(rawURL, "sqlite:") {
		return "", false
	}
	path := strings.TrimPrefix(strings.TrimPrefix(rawURL, "sqlite:"), "//") // sqlite://path is accepted too
	return path, path != ""
}

// CheckExists returns an error naming the path when rawURL is a sqlite: URL
// whose file does not exist; nil for any other URL (and for :memory:).
func CheckExists(rawURL string) error {
	path, ok := SQLitePath(rawURL)
	if !ok || path == sqlitestore.Memory {
		return nil
	}
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("open store: no SQLite store at %s (rathctl dev, rathctl migrate or rathctl demo create one; check --store or RATH_STORE): %w", path, fs.ErrNotExist)
		}
		return fmt.Errorf("open store: %w", err)
	}
	return nil
}

// Open opens the store named by rawURL. Errors never quote the URL, which
// may carry a password.
func Open(ctx context.Context, rawURL string, opts Options) (store.Store, error) {
	switch {
	case strings.HasPrefix(rawURL, "postgres://"), strings.HasPrefix(rawURL, "postgresql://"):
		return pgstore.Open(ctx, rawURL, pgstore.Options{Migrate: opts.Migrate})
	case strings.HasPrefix(rawURL, "sqlite:"):
		path, ok := SQLitePath(rawURL)
		if !ok {
			return nil, fmt.Errorf("open store: sqlite URL needs a path (sqlite:path/to/rath.db or sqlite::memory:)")
		}
		if !opts.Create {
			if err := CheckExists(rawURL); err != nil {
				return nil, err
			}
		}
		return sqlitestore.Open(ctx, path, sqlitestore.Options{Migrate: opts.Migrate})
	}
	scheme, _, ok := strings.Cut(rawURL, ":")
	if !ok || strings.ContainsAny(scheme, "/@") {
		scheme = "(none)"
	}
	return nil, fmt.Errorf("open store: unsupported URL scheme %q: want postgres://… or sqlite:path", scheme)
}
