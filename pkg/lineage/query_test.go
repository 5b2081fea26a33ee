package lineage_test

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/store/pgstore"
	"github.com/rath-run/rath/pkg/store/sqlitestore"
	"github.com/rath-run/rath/pkg/store/storetest"
)

var (
	psqlVar   = regexp.MustCompile(`:'([a-z_]+)'`)
	sqliteVar = regexp.MustCompile(`:([a-z_]+)\b`)
)

func sqlCell(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case [16]byte:
		return uuid.UUID(x).String()
	case []byte:
		return string(x)
	default:
		return fmt.Sprint(x)
	}
}

// TestBlameQuery runs the one-query blame of docs/lineage.md on both
// stores and checks it agrees with Blame on every chunk of every version
// of a run with fan-out, a merge, a selector and a compression.
func TestBlameQuery(t *testing.T) {
	ctx := context.Background()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			f := buildRun(t, st)
			lang, param := "sql", psqlVar
			var run func(q string) ([]string, error)
			switch s := st.(type) {
			case *pgstore.Store:
				run = func(q string) ([]string, error) {
					rows, err := s.Pool().Query(ctx, q)
					if err != nil {
						return nil, err
					}
					defer rows.Close()
					var out []string
					for rows.Next() {
						vals, err := rows.Values()
						if err != nil {
							return nil, err
						}
						cells := make([]string, len(vals))
						for i, v := range vals {
							cells[i] = sqlCell(v)
						}
						out = append(out, strings.Join(cells, "|"))
					}
					return out, rows.Err()
				}
			case *sqlitestore.Store:
				lang, param = "sqlite", sqliteVar
				run = func(q string) ([]string, error) {
					rows, err := s.DB().QueryContext(ctx, q)
					if err != nil {
						return nil, err
					}
					defer rows.Close()
					cols, _ := rows.Columns()
					var out []string
					for rows.Next() {
						vals := make([]any, len(cols))
						ptrs := make([]any, len(cols))
						for i := range vals {
							ptrs[i] = &vals[i]
						}
						if err := rows.Scan(ptrs...); err != nil {
							return nil, err
						}
						cells := make([]string, len(vals))
						for i, v := range vals {
							cells[i] = sqlCell(v)
						}
						out = append(out, strings.Join(cells, "|"))
					}
					return out, rows.Err()
				}
			}
			checkBlameQuery(t, st, f, lang, param, run)
		})
	}
}

// TestBlameQueryInTheShell runs the SQLite blame query of docs/lineage.md
// through the sqlite3 shell, as a user of `rathctl dev` would on
// .rath/rath.db: the shell's SQLite (3.40 on Debian 12) is older than the
// driver's, and the query must run on both.
func TestBlameQueryInTheShell(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rath.db")
	st, err := sqlitestore.Open(context.Background(), path, sqlitestore.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := buildRun(t, st)
	checkBlameQuery(t, st, f, "sqlite", sqliteVar, storetest.SQLiteShell(t, path, ""))
}

// checkBlameQuery runs docs/lineage.md's one blame query in lang through
// run for several versions of f and compares its rows with Blame's.
func checkBlameQuery(t *testing.T, st store.Store, f runFixture, lang string, param *regexp.Regexp, run func(q string) ([]string, error)) {
	t.Helper()
	ctx := context.Background()
	qs := storetest.GuideQueries(t, "../../docs/lineage.md", lang)
	if len(qs) != 1 || qs[0].Check != "blame" {
		t.Fatalf("docs/lineage.md %s queries = %+v, want one blame query", lang, qs)
	}
	for _, s := range []session.Session{f.a1, f.sel, f.final, f.c1} {
		q := param.ReplaceAllString(qs[0].SQL, "'"+s.ID().String()+"'")
		got, err := run(q)
		if err != nil {
			t.Fatalf("blame query: %v", err)
		}
		entries := must[[]lineage.Entry](t)(lineage.Blame(ctx, st, s.ID()))
		var want []string
		for _, e := range entries {
			want = append(want, strings.Join([]string{fmt.Sprint(e.Ord), string(e.Kind), e.Version.String(), string(e.Op),
				e.Agent, e.Step, e.Tool, e.CallID, e.Run, e.Model, e.Worker, e.Snapshot}, "|"))
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("blame query of %s:\n got:\n  %s\n want (Blame):\n  %s", s.ID(), strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	}
}
