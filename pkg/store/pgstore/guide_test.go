package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/pgstore"
)

type guideQuery struct {
	check, sql string
}

// guideQueries extracts the ```sql blocks of docs/lineage-sql.md; each
// starts with a "-- check: NAME" line.
func guideQueries(t *testing.T) []guideQuery {
	t.Helper()
	raw, err := os.ReadFile("../../../docs/lineage-sql.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(string(raw), -1)
	var out []guideQuery
	for i, b := range blocks {
		first, rest, _ := strings.Cut(b[1], "\n")
		name, ok := strings.CutPrefix(first, "-- check: ")
		if !ok {
			t.Fatalf("sql block %d of the guide does not start with \"-- check: NAME\": %q", i, first)
		}
		out = append(out, guideQuery{check: strings.TrimSpace(name), sql: rest})
	}
	return out
}

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

// TestLineageGuide runs every query of docs/lineage-sql.md against a
// populated database and checks its answer.
func TestLineageGuide(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t, pgstore.Options{})
	step := func(s session.Session, agent, stepID string, tokens int64, chunks ...session.Chunk) session.Session {
		t.Helper()
		out, err := s.Extend(ctx, session.Extension{Op: session.OpStep, Chunks: chunks, Key: stepID,
			Usage:    session.Usage{PromptTokens: tokens / 2, CompletionTokens: tokens - tokens/2, TotalTokens: tokens},
			Producer: session.Producer{Run: "run-1", Step: stepID, Agent: agent, Model: "m"}})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	root, err := session.New(ctx, st, session.System("You plan trips."), session.User("Plan a day in Kyoto."))
	if err != nil {
		t.Fatal(err)
	}
	forkA, _ := root.Fork(ctx)
	forkB, _ := root.Fork(ctx)
	call := func(id, name, args string) session.ToolCall {
		return session.ToolCall{ID: id, Function: session.FunctionCall{Name: name, Arguments: args}}
	}
	a1 := step(forkA, "planner-a", "s-a1", 100, session.Assistant("", call("call-1", "get_weather", `{"city":"Kyoto"}`)))
	a2 := step(a1, "planner-a", "s-a2", 0, session.ToolResultChunk(session.ToolResult{ToolCallID: "call-1", Name: "get_weather", Content: `{"temp":21}`}))
	a3 := step(a2, "planner-a", "s-a3", 50, session.Assistant("Answer A: temples in the morning."))
	b1 := step(forkB, "planner-b", "s-b1", 20, session.Assistant("", call("call-2", "search_hotels", `{"near":"Gion"}`)))
	b2 := step(b1, "planner-b", "s-b2", 0, session.ToolResultChunk(session.ToolResult{ToolCallID: "call-2", Name: "search_hotels", Content: `["Hotel Gion"]`}))
	b3 := step(b2, "planner-b", "s-b3", 10, session.Assistant("Answer B: stay in Gion."))
	final, err := a3.Merge(ctx, b3)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"root": root.ID().String(), "final": final.ID().String(), "run": "run-1"}

	transcript, err := final.Chunks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var wantTranscript []string
	for i, c := range transcript {
		content := "NULL"
		if c.Kind() != session.KindAssistant || c.Text() != "" {
			content = c.Text()
		}
		wantTranscript = append(wantTranscript, fmt.Sprintf("%d|%s|%s", i, c.Kind(), content))
	}
	anc, err := st.Ancestors(ctx, final.ID(), 0)
	if err != nil {
		t.Fatal(err)
	}
	var wantAnc []string
	for _, a := range anc {
		wantAnc = append(wantAnc, fmt.Sprintf("%d|%s|%s", a.Depth, a.Op, a.ID))
	}
	want := map[string][]string{
		"transcript":          wantTranscript,
		"ancestors":           wantAnc,
		"final_answer_branch": {fmt.Sprintf("%s|planner-b|s-b3|Answer B: stay in Gion.|%s", b3.ID(), forkB.ID())},
		"tool_calls_in_run": {
			`planner-a|call-1|get_weather|{"city":"Kyoto"}|{"temp":21}`,
			`planner-b|call-2|search_hotels|{"near":"Gion"}|["Hotel Gion"]`,
		},
		"usage_per_branch": {
			fmt.Sprintf("%s|planner-a|150", forkA.ID()),
			fmt.Sprintf("%s|planner-b|30", forkB.ID()),
		},
		"descendant_count": {"9"}, // 2 forks, 6 steps, 1 merge
	}

	queries := guideQueries(t)
	seen := map[string]bool{}
	for _, q := range queries {
		seen[q.check] = true
		w, ok := want[q.check]
		if !ok {
			t.Errorf("the guide has a query %q that this test does not check", q.check)
			continue
		}
		sql := psqlVar.ReplaceAllStringFunc(q.sql, func(m string) string {
			name := psqlVar.FindStringSubmatch(m)[1]
			v, ok := vars[name]
			if !ok {
				t.Fatalf("query %s uses :'%s', which the test does not set", q.check, name)
			}
			return "'" + strings.ReplaceAll(v, "'", "''") + "'"
		})
		rows, err := st.Pool().Query(ctx, sql)
		if err != nil {
			t.Errorf("query %s: %v", q.check, err)
			continue
		}
		var got []string
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				t.Fatalf("query %s: %v", q.check, err)
			}
			cells := make([]string, len(vals))
			for i, v := range vals {
				cells[i] = cell(v)
			}
			got = append(got, strings.Join(cells, "|"))
		}
		if err := rows.Err(); err != nil {
			t.Errorf("query %s: %v", q.check, err)
			continue
		}
		if strings.Join(got, "\n") != strings.Join(w, "\n") {
			t.Errorf("query %s:\n got:\n  %s\n want:\n  %s", q.check, strings.Join(got, "\n  "), strings.Join(w, "\n  "))
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("the guide lost its %q query", name)
		}
	}
}
