// Package migrations holds Rath's database schema as goose migrations,
// embedded in the binaries. The two dialects are kept apart because their SQL
// differs (types, triggers, recursive views):
//
//   - [Postgres]: the files under postgres/, for the Postgres store;
//   - [SQLite]: the files under sqlite/, for the embedded store.
//
// Versions are shared across dialects: 00001 creates the Session Graph
// tables and their append-only triggers, 00002 the lineage views users query.
// Later issues add their tables from 00003 on, in both directories.
package migrations

import (
	"embed"
	"io/fs"
)

//go:embed postgres/*.sql
var postgresFS embed.FS

//go:embed sqlite/*.sql
var sqliteFS embed.FS

// Postgres returns the Postgres migrations, rooted so that goose sees the
// .sql files at the top level.
func Postgres() fs.FS { return mustSub(postgresFS, "postgres") }

// SQLite returns the SQLite migrations, rooted like [Postgres].
func SQLite() fs.FS { return mustSub(sqliteFS, "sqlite") }

func mustSub(f embed.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		// dir is a constant naming an embedded directory; Sub cannot fail.
		panic("migrations: " + err.Error())
	}
	return sub
}
