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
	"fmt"
	"strings"

	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/store/pgstore"
	"github.com/rath-run/rath/pkg/store/sqlitestore"
)

// Options apply to whichever store the URL names.
type Options struct {
	// Migrate applies the embedded migrations on open.
	Migrate bool
}

// Open opens the store named by rawURL. Errors never quote the URL, which
// may carry a password.
func Open(ctx context.Context, rawURL string, opts Options) (store.Store, error) {
	switch {
	case strings.HasPrefix(rawURL, "postgres://"), strings.HasPrefix(rawURL, "postgresql://"):
		return pgstore.Open(ctx, rawURL, pgstore.Options{Migrate: opts.Migrate})
	case strings.HasPrefix(rawURL, "sqlite:"):
		path := strings.TrimPrefix(rawURL, "sqlite:")
		path = strings.TrimPrefix(path, "//") // sqlite://path is accepted too
		if path == "" {
			return nil, fmt.Errorf("open store: sqlite URL needs a path (sqlite:path/to/rath.db or sqlite::memory:)")
		}
		return sqlitestore.Open(ctx, path, sqlitestore.Options{Migrate: opts.Migrate})
	}
	scheme, _, ok := strings.Cut(rawURL, ":")
	if !ok || strings.ContainsAny(scheme, "/@") {
		scheme = "(none)"
	}
	return nil, fmt.Errorf("open store: unsupported URL scheme %q: want postgres://… or sqlite:path", scheme)
}
