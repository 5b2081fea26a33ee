package pgstore_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/rath-run/rath/pkg/store/pgstore"
	"github.com/rath-run/rath/pkg/store/storetest"
)

// psqlVar matches psql's :'name' interpolation.
var psqlVar = regexp.MustCompile(`:'([a-z_]+)'`)

func cell(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case [16]byte:
		return uuid.UUID(x).String()
	default:
		return fmt.Sprint(x)
	}
}

// TestLineageGuide runs every Postgres query of docs/lineage-sql.md against
// a populated database and checks its answer.
func TestLineageGuide(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t, pgstore.Options{})
	vars, want := storetest.GuideFixture(t, st)
	queries := storetest.GuideQueries(t, "../../../docs/lineage-sql.md", "sql")
	storetest.CheckGuide(t, queries, psqlVar, vars, want, func(sql string) ([]string, error) {
		rows, err := st.Pool().Query(ctx, sql)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var got []string
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				return nil, err
			}
			cells := make([]string, len(vals))
			for i, v := range vals {
				cells[i] = cell(v)
			}
			got = append(got, strings.Join(cells, "|"))
		}
		return got, rows.Err()
	})
}
