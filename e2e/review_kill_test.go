package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/session"
)

// TestReviewAfterWorkerKill SIGKILLs a worker process in the middle of a
// call to a tool not declared idempotent (the test MCP server's tally: it
// counts the execution, then holds). The redelivered step does not run
// the call again: the run goes to needs_review, and `rathctl runs show`
// names the call, its arguments and the worker that started it. `rathctl
// review RUN --retry` runs the call once more; `--skip --result JSON`
// runs nothing and the JSON is the call's result. Either way the run
// completes and its transcript holds the review chunk. After the skip,
// redacting the chunks that hold the result leaves no copy of it in any
// table of the database (the journal's copies went at the commit).
func TestReviewAfterWorkerKill(t *testing.T) {
	rig := newTallyRig(t, false)
	_, env := tallyModel(t, 1, int((10 * time.Minute).Milliseconds()), 20*time.Millisecond)
	c := newCluster(t, clusterConfig{workers: 1, env: append(env, rig.env...)})
	w := c.workers[0]
	spec := filepath.Join(c.dir, "tally-agent.json")
	if err := os.WriteFile(spec, rig.spec, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	g := c.graph()

	// runKilled starts a run, kills the worker once its tool call started
	// and waits for needs_review; it returns the run's id.
	runKilled := func(t *testing.T, message string) string {
		t.Helper()
		out, err := c.rathctl("run", "--agent", spec, "--message", message, "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var r struct{ ID string }
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatal(err)
		}
		key := message + "#1"
		c.waitFor("the tally call to start", 60*time.Second, func() bool { return rig.counts(t)[key] == 1 })
		w.kill(t)
		w.start(t)
		var show string
		c.waitFor("the run to need a review", 60*time.Second, func() bool {
			b, err := c.rathctl("runs", "show", r.ID)
			show = string(b)
			return err == nil && strings.Contains(show, "status  needs_review")
		})
		args, _ := json.Marshal(map[string]any{"key": key, "hold_first_ms": int((10 * time.Minute).Milliseconds())})
		for _, want := range []string{"t1", "cnt__tally", string(args), "w1"} {
			if !strings.Contains(show, want) {
				t.Errorf("rathctl runs show does not name %s:\n%s", want, show)
			}
		}
		if n := rig.counts(t)[key]; n != 1 {
			t.Fatalf("the call ran %d times before the review, want 1 (the killed one)", n)
		}
		return r.ID
	}
	// reviewChunk returns the decision of the review chunk in the run's
	// committed transcript, and the transcript.
	reviewChunk := func(t *testing.T, id string) (agent.Review, session.Session) {
		t.Helper()
		run := c.waitSucceeded(id)
		s, err := session.Open(ctx, g, *run.Output)
		if err != nil {
			t.Fatal(err)
		}
		var rev []agent.Review
		for _, ch := range s.Version().Chunks {
			if ch.Kind() == session.KindReview {
				r, err := agent.ParseReview(ch.Payload())
				if err != nil {
					t.Fatal(err)
				}
				rev = append(rev, r)
			}
		}
		if len(rev) != 1 {
			t.Fatalf("the transcript holds %d review chunks, want 1", len(rev))
		}
		return rev[0], s
	}

	t.Run("retry", func(t *testing.T) {
		id := runKilled(t, "review retry")
		if _, err := c.rathctl("review", id, "--retry"); err != nil {
			t.Fatal(err)
		}
		r, _ := reviewChunk(t, id)
		if r.Decision != agent.ReviewRetry || r.CallID != "t1" || r.Tool != "cnt__tally" {
			t.Fatalf("review chunk %+v, want retry of t1 (cnt__tally)", r)
		}
		if n := rig.counts(t)["review retry#1"]; n != 2 {
			t.Fatalf("the call ran %d times, want 2 (the killed one and the retry)", n)
		}
	})
	t.Run("skip", func(t *testing.T) {
		const secret = "SKIP-RESULT-SECRET-5b1e"
		id := runKilled(t, "review skip")
		if _, err := c.rathctl("review", id, "--skip", "--result", `{"note":"`+secret+`"}`); err != nil {
			t.Fatal(err)
		}
		r, s := reviewChunk(t, id)
		if r.Decision != agent.ReviewSkip || r.CallID != "t1" {
			t.Fatalf("review chunk %+v, want skip of t1", r)
		}
		if n := rig.counts(t)["review skip#1"]; n != 1 {
			t.Fatalf("the call ran %d times, want 1 (the killed one; the skip runs nothing)", n)
		}
		db := c.sqlDB()
		if holders := tablesHolding(t, db, secret); len(holders) == 0 {
			t.Fatal("no table holds the skip's result before the redaction (the check below could not fail)")
		}
		var ords []int
		for i, ch := range s.Version().Chunks {
			if strings.Contains(string(ch.Payload()), secret) {
				ords = append(ords, i+s.Len()-len(s.Version().Chunks))
			}
		}
		if len(ords) == 0 {
			t.Fatal("no chunk of the step holds the skip's result")
		}
		for _, ord := range ords {
			cmd := exec.Command(bin(t, "rathctl"), "redact", s.ID().String(), "--chunk", strconv.Itoa(ord), "--reason", "leaked", "--store", c.storeURL)
			cmd.Env, cmd.Dir = os.Environ(), c.dir
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("rathctl redact --chunk %d: %v: %s", ord, err, b)
			}
		}
		if holders := tablesHolding(t, db, secret); len(holders) > 0 {
			t.Fatalf("after the redaction, the skip's result is still in %v", holders)
		}
		var kinds []string
		if err := queryStrings(db, &kinds, `SELECT kind FROM step_journal j JOIN steps s ON s.id = j.step_id WHERE s.run_id = $1 ORDER BY kind`, id); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.Join(kinds, ","), runs.JournalAmbiguous) || !strings.Contains(strings.Join(kinds, ","), runs.JournalReview) {
			t.Errorf("journal kinds after the commit: %v, want the ambiguous and review entries kept as evidence", kinds)
		}
	})
}

// tablesHolding returns the tables of the database's current schema with
// a row whose text holds s.
func tablesHolding(t *testing.T, db *sql.DB, s string) []string {
	t.Helper()
	var tables []string
	if err := queryStrings(db, &tables, `SELECT table_name FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name`); err != nil {
		t.Fatal(err)
	}
	if len(tables) < 10 {
		t.Fatalf("only %d tables in the schema: %v", len(tables), tables)
	}
	var out []string
	for _, tbl := range tables {
		var n int
		q := fmt.Sprintf(`SELECT COUNT(*) FROM %q t WHERE t::text LIKE '%%' || $1 || '%%'`, tbl)
		if err := db.QueryRow(q, s).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if n > 0 {
			out = append(out, fmt.Sprintf("%s (%d rows)", tbl, n))
		}
	}
	return out
}

func queryStrings(db *sql.DB, out *[]string, q string, args ...any) error {
	rows, err := db.Query(q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return err
		}
		*out = append(*out, s)
	}
	return rows.Err()
}
