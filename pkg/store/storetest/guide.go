package storetest

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// GuideQuery is one query of the lineage SQL guide (docs/lineage-sql.md).
type GuideQuery struct {
	Check string // the NAME of its first line, "-- check: NAME"
	SQL   string
}

// GuideQueries extracts the code blocks fenced as lang (```sql for
// Postgres, ```sqlite for the embedded store) from the guide at path; each
// must start with a "-- check: NAME" line.
func GuideQueries(t testing.TB, path, lang string) []GuideQuery {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```"+regexp.QuoteMeta(lang)+"\n(.*?)```").FindAllStringSubmatch(string(raw), -1)
	var out []GuideQuery
	for i, b := range blocks {
		first, rest, _ := strings.Cut(b[1], "\n")
		name, ok := strings.CutPrefix(first, "-- check: ")
		if !ok {
			t.Fatalf("%s block %d of the guide does not start with \"-- check: NAME\": %q", lang, i, first)
		}
		out = append(out, GuideQuery{Check: strings.TrimSpace(name), SQL: rest})
	}
	return out
}

// GuideFixture populates st with the guide's example (a user asks for a
// plan, two branches by agents planner-a and planner-b work on it in run
// run-1, each calling a tool, and the branches merge into final; a fork of
// branch A and a step after the merge add work that is no top-level
// branch's own) and returns
// the variables the guide's queries use (root, final, run) and each check's
// expected rows, cells joined by "|" (NULL for SQL NULL).
func GuideFixture(t testing.TB, st store.Store) (vars map[string]string, want map[string][]string) {
	t.Helper()
	ctx := context.Background()
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
	root := must(session.New(ctx, st, session.System("You plan trips."), session.User("Plan a day in Kyoto.")))(t)
	forkA := must(root.Fork(ctx))(t)
	forkB := must(root.Fork(ctx))(t)
	call := func(id, name, args string) session.ToolCall {
		return session.ToolCall{ID: id, Function: session.FunctionCall{Name: name, Arguments: args}}
	}
	a1 := step(forkA, "planner-a", "s-a1", 100, session.Assistant("", call("call-1", "get_weather", `{"city":"Kyoto"}`)))
	a2 := step(a1, "planner-a", "s-a2", 0, session.ToolResultChunk(session.ToolResult{ToolCallID: "call-1", Name: "get_weather", Content: `{"temp":21}`}))
	a3 := step(a2, "planner-a", "s-a3", 50, session.Assistant("Answer A: temples in the morning."))
	b1 := step(forkB, "planner-b", "s-b1", 20, session.Assistant("", call("call-2", "search_hotels", `{"near":"Gion"}`)))
	b2 := step(b1, "planner-b", "s-b2", 0, session.ToolResultChunk(session.ToolResult{ToolCallID: "call-2", Name: "search_hotels", Content: `["Hotel Gion"]`}))
	b3 := step(b2, "planner-b", "s-b3", 10, session.Assistant("Answer B: stay in Gion."))
	final := must(a3.Merge(ctx, b3))(t)
	// Work that is not a top-level branch's own: a fork of branch A with a
	// step, and a step after the merge. usage_per_branch must not count it.
	subA := must(a3.Fork(ctx))(t)
	step(subA, "planner-a", "s-a4", 1000)
	step(final, "writer", "s-f1", 7000, session.Assistant("Both: temples, then Gion."))
	vars = map[string]string{"root": root.ID().String(), "final": final.ID().String(), "run": "run-1"}

	var wantTranscript []string
	for i, c := range must(final.Chunks(ctx))(t) {
		content := "NULL"
		if c.Kind() != session.KindAssistant || c.Text() != "" {
			content = c.Text()
		}
		wantTranscript = append(wantTranscript, fmt.Sprintf("%d|%s|%s", i, c.Kind(), content))
	}
	var wantAnc []string
	for _, a := range must(st.Ancestors(ctx, final.ID(), 0))(t) {
		wantAnc = append(wantAnc, fmt.Sprintf("%d|%s|%s", a.Depth, a.Op, a.ID))
	}
	want = map[string][]string{
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
		"descendant_count": {"12"}, // 3 forks, 8 steps, 1 merge
	}
	return vars, want
}

// CheckGuide runs every query with its variables (matched by param, whose
// first group is the name) replaced by quoted literals, through run, and
// compares the rows with want. Every check in want must have a query.
func CheckGuide(t *testing.T, queries []GuideQuery, param *regexp.Regexp, vars map[string]string, want map[string][]string,
	run func(sql string) ([]string, error)) {
	t.Helper()
	seen := map[string]bool{}
	for _, q := range queries {
		seen[q.Check] = true
		w, ok := want[q.Check]
		if !ok {
			t.Errorf("the guide has a query %q that this test does not check", q.Check)
			continue
		}
		sql := param.ReplaceAllStringFunc(q.SQL, func(m string) string {
			name := param.FindStringSubmatch(m)[1]
			v, ok := vars[name]
			if !ok {
				t.Fatalf("query %s uses the variable %q, which the test does not set", q.Check, name)
			}
			return "'" + strings.ReplaceAll(v, "'", "''") + "'"
		})
		got, err := run(sql)
		if err != nil {
			t.Errorf("query %s: %v", q.Check, err)
			continue
		}
		if strings.Join(got, "\n") != strings.Join(w, "\n") {
			t.Errorf("query %s:\n got:\n  %s\n want:\n  %s", q.Check, strings.Join(got, "\n  "), strings.Join(w, "\n  "))
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("the guide lost its %q query", name)
		}
	}
}
