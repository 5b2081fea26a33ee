package testdb

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Conn is what CachedPlans needs of a connection or transaction.
type Conn interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// CachedPlans prepares sql as name on conn, executes it n times with lits
// (SQL literals, one for each parameter), and returns how many of the
// executions ran on the statement's cached generic plan and how many
// Postgres planned anew for their values (pg_prepared_statements; Postgres
// 14 or later). Postgres plans the first five for their values; after
// that a statement whose generic plan costs no more than those runs on it.
func CachedPlans(t testing.TB, conn Conn, name, sql string, n int, lits ...string) (generic, custom int64) {
	t.Helper()
	ctx := t.Context()
	if _, err := conn.Exec(ctx, "PREPARE "+name+" AS "+sql); err != nil {
		t.Fatalf("%s: prepare: %v", name, err)
	}
	for range n {
		if _, err := conn.Exec(ctx, "EXECUTE "+name+"("+strings.Join(lits, ", ")+")"); err != nil {
			t.Fatalf("%s: execute: %v", name, err)
		}
	}
	if err := conn.QueryRow(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = $1`, name).Scan(&generic, &custom); err != nil {
		t.Fatalf("%s: pg_prepared_statements: %v", name, err)
	}
	return generic, custom
}

// PlanNodes returns the nodes of an EXPLAIN (FORMAT JSON) plan, every
// level's, each as the plan's JSON object ("Node Type", "Relation Name",
// "Index Name", "Index Cond"…).
func PlanNodes(t testing.TB, raw []byte) []map[string]any {
	t.Helper()
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("plan: %v", err)
	}
	var nodes []map[string]any
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if _, ok := v["Node Type"]; ok {
				nodes = append(nodes, v)
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	return nodes
}
