package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/check"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/llm/llmtest"
)

// faultScale is RATH_FAULT_SCALE (default 1): the fault tests' sizes are
// multiplied by it. `make faults` runs them at 5: 1,000 steps and 50 kills.
func faultScale(t *testing.T) int {
	t.Helper()
	s := os.Getenv("RATH_FAULT_SCALE")
	if s == "" {
		return 1
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("RATH_FAULT_SCALE=%q: want a positive integer", s)
	}
	return n
}

// fakeModel is the fake OpenAI server the workers call: every request is
// answered "ok" after latency, so a kill lands in the middle of a step.
func fakeModel(t *testing.T, latency time.Duration) (*llmtest.Server, []string) {
	t.Helper()
	srv := llmtest.NewServer(t)
	srv.Handle(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Content: "ok", Delay: latency} })
	return srv, []string{"OPENAI_API_KEY=sk-fault-test", "OPENAI_BASE_URL=" + srv.URL(), "OPENAI_DEFAULT_MODEL=fake"}
}

// faultSpec is the agent every fault-test run forwards its input through.
var faultSpec = json.RawMessage(`{"name":"fault","model":"fake"}`)

func (c *cluster) client() *client.Client {
	c.t.Helper()
	cl, err := client.New(c.server, "")
	if err != nil {
		c.t.Fatal(err)
	}
	return cl
}

// submitRun submits one run of faultSpec through the HTTP API.
func submitRun(ctx context.Context, cl *client.Client, message string) (runs.Run, error) {
	return submitRunOf(ctx, cl, faultSpec, message)
}

// submitRunOf submits one run of spec through the HTTP API.
func submitRunOf(ctx context.Context, cl *client.Client, spec json.RawMessage, message string) (runs.Run, error) {
	var r runs.Run
	err := cl.Do(ctx, "POST", "/v1/runs", map[string]any{"agent": spec, "message": message}, &r)
	return r, err
}

// sqlDB opens the cluster's database for direct queries.
func (c *cluster) sqlDB() *sql.DB {
	c.t.Helper()
	db, err := sql.Open("pgx", c.storeURL)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = db.Close() })
	return db
}

// countAfterRestart is count for a query that may meet a pooled connection
// the last restart broke: it retries until the query answers.
func countAfterRestart(t *testing.T, db *sql.DB, q string) int {
	t.Helper()
	var n int
	testenv.Eventually(t, time.Minute, q+" answers", func() bool {
		return db.QueryRow(q).Scan(&n) == nil
	})
	return n
}

func count(t *testing.T, db *sql.DB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// checkInvariants runs the invariant checker on the cluster's database,
// requiring every run to have ended.
func (c *cluster) checkInvariants() check.Report {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := check.Run(ctx, c.storeURL, check.Options{Settled: true})
	if err != nil {
		c.t.Fatalf("invariant checker: %v", err)
	}
	if !rep.OK() {
		c.t.Fatalf("invariant checker: %d problem(s): %v", len(rep.Problems), rep.Problems)
	}
	c.t.Logf("invariant checker: ok (%d versions, %d runs, %d steps)", rep.Versions, rep.Runs, rep.Steps)
	return rep
}

// waitAllEnded waits until no run is pending or running; on timeout it
// fails naming the open steps.
func waitAllEnded(t *testing.T, db *sql.DB, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for range tick.C {
		var n int
		if err := db.QueryRow(`SELECT COUNT(*) FROM runs WHERE status IN ('pending', 'running')`).Scan(&n); err == nil && n == 0 {
			return
		}
		if time.Now().After(deadline) {
			break
		}
	}
	dumpStacks(t)
	rows, err := db.Query(`SELECT s.id, s.status, s.attempts, s.worker, s.error, s.updated_at, r.status FROM steps s JOIN runs r ON r.id = s.run_id
		WHERE r.status IN ('pending', 'running') ORDER BY s.updated_at LIMIT 20`)
	if err != nil {
		t.Fatalf("runs still open after %s; listing them: %v", timeout, err)
	}
	defer rows.Close()
	var open []string
	for rows.Next() {
		var id, status, worker, reason, runStatus string
		var attempts int
		var updated time.Time
		if err := rows.Scan(&id, &status, &attempts, &worker, &reason, &updated, &runStatus); err != nil {
			t.Fatal(err)
		}
		open = append(open, fmt.Sprintf("step %s %s attempts=%d worker=%s updated=%s error=%q (run %s)",
			id, status, attempts, worker, updated.Format(time.RFC3339Nano), reason, runStatus))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	t.Fatalf("runs still open after %s:\n%s", timeout, strings.Join(open, "\n"))
}

// assertAllSucceeded fails the test when any run did not succeed.
func assertAllSucceeded(t *testing.T, db *sql.DB, want int) {
	t.Helper()
	rows, err := db.Query(`SELECT status, COUNT(*), MIN(error) FROM runs GROUP BY status`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]int{}
	for rows.Next() {
		var status, firstErr string
		var n int
		if err := rows.Scan(&status, &n, &firstErr); err != nil {
			t.Fatal(err)
		}
		got[status] = n
		if status != string(runs.RunSucceeded) {
			t.Errorf("%d run(s) %s, e.g.: %s", n, status, firstErr)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if got[string(runs.RunSucceeded)] < want {
		t.Fatalf("%d runs succeeded, want %d: %v", got[string(runs.RunSucceeded)], want, got)
	}
}

// killRecord is one SIGKILL of a worker with a step in flight.
type killRecord struct {
	at     time.Time
	victim string
	step   string
}

// TestWorkerKillsAtScale runs 200×RATH_FAULT_SCALE runs of a 4-round tool
// step (rounds 1–3 call the test MCP server's tally tool, declared
// idempotent, which counts its executions in a file; round 4 answers) on
// four worker processes (two slots each; the fake model answers after
// 40 ms) while SIGKILLing, 10×RATH_FAULT_SCALE times, a worker that has a
// step in flight (read from the steps table) and restarting it at once.
// Nothing may be lost or committed twice (every run succeeds; the invariant
// checker). The step journal resumes a redelivered step: a model request
// or a tally execution is repeated only when it was in flight at a kill
// (its reply or result not recorded), so each kill repeats at most one
// request and one call per slot; the repeats and recovery times (kill → the
// killed step's commit) are reported.
func TestWorkerKillsAtScale(t *testing.T) {
	t.Parallel()
	scale := faultScale(t)
	nSteps, nKills := 200*scale, 10*scale
	const toolRounds, slots = 3, 2
	rig := newTallyRig(t, true)
	model, env := tallyModel(t, toolRounds, 0, 40*time.Millisecond)
	c := newCluster(t, clusterConfig{workers: 4, env: append(env, rig.env...), workerArgs: []string{"--slots", strconv.Itoa(slots)}})
	db := c.sqlDB()
	cl := c.client()
	ctx := context.Background()
	start := time.Now()

	// Submit every run from 8 clients.
	var submitted atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < nSteps; i += 8 {
				if _, err := submitRunOf(ctx, cl, rig.spec, fmt.Sprintf("kill-test step %d", i)); err != nil {
					errs <- err
					return
				}
				submitted.Add(1)
			}
		}()
	}

	// Kill a worker each time another nSteps/(nKills+1) steps committed.
	var kills []killRecord
	byLabel := map[string]*proc{}
	for _, w := range c.workers {
		byLabel[w.label] = w
	}
	for k := 1; k <= nKills; k++ {
		threshold := k * nSteps / (nKills + 1)
		var step, victim string
		testenv.Eventually(t, 5*time.Minute, fmt.Sprintf("kill %d: %d steps committed and a step in flight", k, threshold), func() bool {
			if count(t, db, `SELECT COUNT(*) FROM steps WHERE status = 'committed'`) < threshold {
				return false
			}
			err := db.QueryRow(`SELECT id, worker FROM steps WHERE status = 'running' ORDER BY random() LIMIT 1`).Scan(&step, &victim)
			return err == nil && byLabel[victim] != nil && byLabel[victim].running()
		})
		w := byLabel[victim]
		w.kill(t)
		kills = append(kills, killRecord{at: time.Now(), victim: victim, step: step})
		w.start(t)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("submit: %v", err)
	}
	waitAllEnded(t, db, 15*time.Minute)
	elapsed := time.Since(start)
	assertAllSucceeded(t, db, nSteps)
	c.checkInvariants()
	if n := count(t, db, `SELECT COUNT(*) FROM versions WHERE op = 'step'`); n != nSteps {
		t.Fatalf("%d step versions for %d steps", n, nSteps)
	}

	// Repeats: model requests per round and tally executions per call
	// beyond one. Only what was in flight at a kill may repeat: at most
	// one request and one call per slot of the killed worker.
	tallies := rig.counts(t)
	extraRequests, extraCalls, requests, calls := 0, 0, 0, 0
	for i := range nSteps {
		msg := fmt.Sprintf("kill-test step %d", i)
		rounds := requestsPerRound(model, msg)
		for r := 1; r <= toolRounds+1; r++ {
			n := rounds[r]
			if n == 0 {
				t.Fatalf("step %d committed without a model request for round %d (%v)", i, r, rounds)
			}
			requests += n
			extraRequests += n - 1
		}
		for r := 1; r <= toolRounds; r++ {
			n := tallies[fmt.Sprintf("%s#%d", msg, r)]
			if n == 0 {
				t.Fatalf("step %d committed without running its round-%d tool call", i, r)
			}
			calls += n
			extraCalls += n - 1
		}
	}
	if extraRequests > slots*len(kills) || extraCalls > slots*len(kills) {
		t.Errorf("%d repeated model requests and %d repeated tool executions for %d kills of %d-slot workers: a recorded round or call was repeated",
			extraRequests, extraCalls, len(kills), slots)
	}
	// Recovery: kill → the killed step's commit.
	var recoveries []time.Duration
	midStep := 0
	for _, k := range kills {
		var finished time.Time
		var attempts int
		if err := db.QueryRow(`SELECT finished_at, attempts FROM steps WHERE id = $1`, k.step).Scan(&finished, &attempts); err != nil {
			t.Fatal(err)
		}
		if attempts >= 2 {
			midStep++
		}
		recoveries = append(recoveries, max(0, finished.Sub(k.at)))
	}
	slices.Sort(recoveries)
	t.Logf("worker kills: %d steps of %d rounds (%d tool calls) on 4 workers × %d slots, %d SIGKILLs (%d landed mid-step: the step was redelivered), %s in all",
		nSteps, toolRounds+1, toolRounds, slots, len(kills), midStep, elapsed.Round(100*time.Millisecond))
	t.Logf("lost steps: 0; duplicate commits: 0 (checker); repeated model requests: %d of %d; repeated tool executions: %d of %d (only calls in flight at a kill)",
		extraRequests, requests, extraCalls, calls)
	t.Logf("recovery (kill → the killed step's commit): median %s, p90 %s, max %s",
		recoveries[len(recoveries)/2].Round(time.Millisecond), recoveries[len(recoveries)*9/10].Round(time.Millisecond),
		recoveries[len(recoveries)-1].Round(time.Millisecond))
}

// loader submits runs continuously until stopped, counting what the
// coordinator accepted; failed submissions (while a dependency is down) are
// counted and retried with the next run.
type loader struct {
	accepted, refused atomic.Int64
	stop              chan struct{}
	done              chan struct{}
}

func startLoader(c *cluster, prefix string, every time.Duration) *loader {
	l := &loader{stop: make(chan struct{}), done: make(chan struct{})}
	cl := c.client()
	go func() {
		defer close(l.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if _, err := submitRun(ctx, cl, fmt.Sprintf("%s %d", prefix, i)); err != nil {
				l.refused.Add(1)
			} else {
				l.accepted.Add(1)
			}
			cancel()
		}
	}()
	return l
}

func (l *loader) finish() { close(l.stop); <-l.done }

// countVersions counts committed versions on a fresh connection (the
// server may just have restarted).
func countVersions(t *testing.T, url string) int {
	t.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	testenv.Eventually(t, time.Minute, "count versions", func() bool {
		return db.QueryRow(`SELECT COUNT(*) FROM versions`).Scan(&n) == nil
	})
	return n
}

// restartUnderLoad drives the cluster with a loader (a run every 25 ms, the
// fake model answering after 20 ms) and applies restart `restarts` times,
// each after the cluster has committed more steps: committed versions
// counted before each restart must all be there after it; at the end every
// accepted run must have succeeded and the invariant checker must pass.
func restartUnderLoad(t *testing.T, c *cluster, what string, restarts int, restart func()) {
	t.Helper()
	dumpProcs.Store(t, c)
	db := c.sqlDB()
	l := startLoader(c, what+" load", 25*time.Millisecond)
	var downtimes []time.Duration
	for i := range restarts {
		target := countAfterRestart(t, db, `SELECT COUNT(*) FROM steps WHERE status = 'committed'`) + 10
		testenv.Eventually(t, 2*time.Minute, fmt.Sprintf("restart %d: progress under load", i+1), func() bool {
			var n int
			return db.QueryRow(`SELECT COUNT(*) FROM steps WHERE status = 'committed'`).Scan(&n) == nil && n >= target
		})
		before := countVersions(t, c.storeURL)
		t0 := time.Now()
		restart()
		after := countVersions(t, c.storeURL)
		downtimes = append(downtimes, time.Since(t0))
		if after < before {
			t.Fatalf("%s restart %d: %d versions before, %d after: committed versions lost", what, i+1, before, after)
		}
	}
	// Keep loading a little after the last restart: the system still works.
	target := countAfterRestart(t, db, `SELECT COUNT(*) FROM steps WHERE status = 'committed'`) + 10
	testenv.Eventually(t, 2*time.Minute, "progress after the last restart", func() bool {
		var n int
		return db.QueryRow(`SELECT COUNT(*) FROM steps WHERE status = 'committed'`).Scan(&n) == nil && n >= target
	})
	l.finish()
	waitAllEnded(t, db, 2*time.Minute)
	accepted := int(l.accepted.Load())
	assertAllSucceeded(t, db, accepted)
	c.checkInvariants()
	for _, w := range c.workers {
		if !w.running() {
			t.Fatalf("worker %s exited during the %s restarts:\n%s", w.label, what, tail(w.output(), 2000))
		}
	}
	if !c.coord.running() {
		t.Fatalf("coordinator exited during the %s restarts:\n%s", what, tail(c.coord.output(), 2000))
	}
	slices.Sort(downtimes)
	t.Logf("%s restarts: %d under load; runs accepted %d (refused while down: %d), all succeeded; committed versions lost: 0; restart took median %s, max %s",
		what, restarts, accepted, l.refused.Load(), downtimes[len(downtimes)/2].Round(time.Millisecond), downtimes[len(downtimes)-1].Round(time.Millisecond))
}

// TestNATSRestartsUnderLoad stops the NATS server and starts it again on
// the same port and file store 10 times while runs are submitted every
// 25 ms.
func TestNATSRestartsUnderLoad(t *testing.T) {
	t.Parallel()
	_, env := fakeModel(t, 20*time.Millisecond)
	c := newCluster(t, clusterConfig{workers: 2, env: env, workerArgs: []string{"--slots", "2"},
		coordArgs: []string{"--reconcile-interval", "1s", "--stale-after", "5s"}})
	restartUnderLoad(t, c, "NATS", 10*faultScale(t), func() {
		c.stopNATS()
		c.startNATS()
	})
}

// dumpProcs, when set by a test, lists the processes whose goroutine stacks
// a timed-out wait dumps (SIGQUIT) into files for diagnosis.
var dumpProcs sync.Map // *testing.T → *cluster

// dumpStacks SIGQUITs the test's cluster processes (a Go program prints
// every goroutine's stack and exits) and keeps their logs under the
// system's temp directory, naming the files in the test log.
func dumpStacks(t *testing.T) {
	v, ok := dumpProcs.Load(t)
	if !ok {
		return
	}
	c := v.(*cluster)
	for _, p := range c.procs {
		if !p.running() || p.name == "natsd" {
			continue
		}
		_ = p.cmd.Process.Signal(syscall.SIGQUIT)
		<-p.done
		path := filepath.Join(os.TempDir(), fmt.Sprintf("rath-e2e-%s-%s%s.log", t.Name(), p.name, p.label))
		if b, err := os.ReadFile(p.log); err == nil && os.WriteFile(path, b, 0o600) == nil {
			t.Logf("%s %s log with goroutine stacks: %s", p.name, p.label, path)
		}
	}
}
