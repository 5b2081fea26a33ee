package runs

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // database/sql driver "sqlite"

	"github.com/rath-run/rath/pkg/store/pgstore"
)

// Open opens the run store at a store URL: postgres://… (or postgresql://…)
// or sqlite:PATH. The schema must already be migrated (store.Store.Migrate).
// The caller closes the returned *sql.DB after the Store is no longer used.
func Open(ctx context.Context, url string) (*Store, *sql.DB, error) {
	var db *sql.DB
	var err error
	switch {
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		// pgxpool's parser, not pgx's: it takes the URL's pool_*
		// settings out (pgx would send them to the server as session
		// parameters, which it refuses), and the pool size applies here too.
		pcfg, perr := pgxpool.ParseConfig(url)
		if perr != nil {
			// pgx's parse errors can quote the URL, password included.
			return nil, nil, fmt.Errorf("run store: the database URL does not parse")
		}
		cfg := pcfg.ConnConfig
		pgstore.ApplySessionDefaults(cfg)
		pgstore.ConfigFromContext(ctx, cfg)
		db = stdlib.OpenDB(*cfg, stdlib.OptionAfterConnect(pgstore.AfterConnect))
		{
			// Keep every connection idle in the pool: database/sql keeps 2 by
			// default, and under load each extra transaction would then
			// open (and fork) a new Postgres backend.
			n, ok := pgstore.URLMaxConns(url)
			if !ok {
				n = pgstore.DefaultMaxConns
			}
			db.SetMaxOpenConns(int(n))
			db.SetMaxIdleConns(int(n))
		}
	case strings.HasPrefix(url, "sqlite:"):
		path := strings.TrimPrefix(url, "sqlite:")
		if path == "" || strings.Contains(path, "?") {
			return nil, nil, fmt.Errorf("run store: sqlite URL %q: want sqlite:PATH", url)
		}
		dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_txlock=immediate"
		db, err = sql.Open("sqlite", dsn)
		if err == nil {
			// SQLite has one writer; one connection avoids self-contention.
			db.SetMaxOpenConns(1)
		}
	default:
		return nil, nil, fmt.Errorf("run store: unsupported URL %q (want postgres://… or sqlite:PATH)", url)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("run store: open: %w", err)
	}
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("run store: connect: %w", err)
	}
	st := NewStore(db, nil)
	st.relaxed = !strings.HasPrefix(url, "sqlite:")
	if st.relaxed {
		// The start statement reads the redaction epoch for the worker's
		// graph cache where this role may: probed now, and again later
		// while it may not (a worker that opened before the coordinator
		// migrated the schema, epoch.go).
		st.epoch.known(ctx, db, st.now())
	}
	return st, db, nil
}
