package sqlitestore_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/store/sqlitestore"
	"github.com/rath-run/rath/pkg/store/storetest"
)

// sqliteVar matches the sqlite3 shell's :name parameters.
var sqliteVar = regexp.MustCompile(`:([a-z_]+)\b`)

// TestLineageGuide runs every embedded-store query of docs/lineage-sql.md
// (the ```sqlite blocks) against a populated database and checks that it
// gives the same answers as the Postgres queries, once through the driver
// and once through the sqlite3 shell the guide tells users to open (an older
// SQLite than the driver's).
func TestLineageGuide(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rath.db")
	st, err := sqlitestore.Open(ctx, path, sqlitestore.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	vars, want := storetest.GuideFixture(t, st)
	queries := storetest.GuideQueries(t, "../../../docs/lineage-sql.md", "sqlite")
	t.Run("shell", func(t *testing.T) {
		storetest.CheckGuide(t, queries, sqliteVar, vars, want, storetest.SQLiteShell(t, path, "NULL"))
	})
	storetest.CheckGuide(t, queries, sqliteVar, vars, want, func(q string) ([]string, error) {
		rows, err := st.DB().QueryContext(ctx, q)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		cols, err := rows.Columns()
		if err != nil {
			return nil, err
		}
		var got []string
		for rows.Next() {
			vals := make([]sql.NullString, len(cols))
			dest := make([]any, len(cols))
			for i := range vals {
				dest[i] = &vals[i]
			}
			if err := rows.Scan(dest...); err != nil {
				return nil, err
			}
			cells := make([]string, len(vals))
			for i, v := range vals {
				cells[i] = "NULL"
				if v.Valid {
					cells[i] = v.String
				}
			}
			got = append(got, strings.Join(cells, "|"))
		}
		return got, rows.Err()
	})
}
