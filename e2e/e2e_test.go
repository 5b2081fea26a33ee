package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testdb"
)

// TestWorkerKilledMidStep SIGKILLs the worker running a step: JetStream
// redelivers the job after the ack wait to the other worker, which commits
// it; the graph holds exactly one version for the step. Then the job is
// published again (a duplicate, as a reconciler would send it): still one
// commit.
func TestWorkerKilledMidStep(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterConfig{workers: 2})
	r := c.submit(4*time.Second, "survive a crash")
	victim := c.runningOn(r.ID)
	victim.kill(t)

	r = c.waitSucceeded(r.ID)
	st := r.Steps[0]
	if st.Attempts < 2 {
		t.Fatalf("step attempts = %d, want a redelivery after the kill", st.Attempts)
	}
	if st.Worker == victim.label {
		t.Fatalf("step committed by %s, the killed worker", st.Worker)
	}
	g := c.graph()
	c.checkOneCommit(g, r)

	// A job published twice: under the step id (deduplicated by JetStream
	// or, past the window, delivered and found committed) and under a fresh
	// message id (delivered, found committed, acked).
	b := c.bus()
	job := bus.Job{StepID: st.ID, RunID: r.ID, Queue: r.Queue, Input: st.Input.String(), Target: r.Target}
	if _, err := b.Publish(context.Background(), job, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish(context.Background(), job, map[string][]string{bus.HeaderMsgID: {st.ID + "/again"}}); err != nil {
		t.Fatal(err)
	}
	c.waitDrained()
	c.checkOneCommit(g, r)
}

// TestCoordinatorRestartMidRun kills the coordinator while a step runs and
// starts a new one: the run completes, and a run submitted to the new
// coordinator completes too.
func TestCoordinatorRestartMidRun(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterConfig{workers: 2})
	r := c.submit(2*time.Second, "outlive the coordinator")
	c.runningOn(r.ID)
	c.coord.kill(t)
	c.coord.start(t)
	c.waitReady()
	r = c.waitSucceeded(r.ID)
	g := c.graph()
	c.checkOneCommit(g, r)

	r2 := c.submit(0, "after the restart")
	c.checkOneCommit(g, c.waitSucceeded(r2.ID))
}

// TestNATSRestart stops the NATS server while a step runs and starts it
// again on the same port and store: the step commits (Postgres does not
// need NATS), its ack is lost, the redelivery finds the commit and acks;
// workers reconnect and take new work; nothing is lost or committed twice.
func TestNATSRestart(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterConfig{workers: 2})
	r := c.submit(1500*time.Millisecond, "outlive NATS")
	c.runningOn(r.ID)
	c.stopNATS()
	// The worker commits to Postgres while NATS is down.
	r = c.waitSucceeded(r.ID)
	c.startNATS()

	r2 := c.submit(0, "after the NATS restart")
	r2 = c.waitSucceeded(r2.ID)
	c.waitDrained()
	g := c.graph()
	c.checkOneCommit(g, r)
	c.checkOneCommit(g, r2)
	for _, w := range c.workers {
		if !w.running() {
			t.Fatalf("worker %v exited during the NATS restart:\n%s", w.args, tail(w.output(), 2000))
		}
	}
}

// TestWorkerLosesPostgres cuts the workers off from Postgres while a step
// runs: the commit fails, the worker logs a clear error and hands the job
// back with a delay; once Postgres is back the step commits once.
func TestWorkerLosesPostgres(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterConfig{workers: 2})
	r := c.submit(1500*time.Millisecond, "outlive Postgres")
	c.runningOn(r.ID)

	admin, err := sql.Open("pgx", testdb.AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	u, err := url.Parse(c.storeURL)
	if err != nil {
		t.Fatal(err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	ctx := context.Background()
	exec := func(q string) {
		t.Helper()
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(fmt.Sprintf("ALTER DATABASE %s ALLOW_CONNECTIONS false", db))
	exec(fmt.Sprintf("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '%s'", db))
	c.waitFor("a worker reporting the lost store", 30*time.Second, func() bool {
		for _, w := range c.workers {
			if out := w.output(); strings.Contains(out, "will retry") &&
				(strings.Contains(out, "not currently accepting connections") || strings.Contains(out, "terminating connection")) {
				return true
			}
		}
		return false
	})
	exec(fmt.Sprintf("ALTER DATABASE %s ALLOW_CONNECTIONS true", db))

	r = c.waitSucceeded(r.ID)
	if r.Steps[0].Attempts < 2 {
		t.Fatalf("step attempts = %d, want a retry after the outage", r.Steps[0].Attempts)
	}
	c.waitDrained()
	c.checkOneCommit(c.graph(), r)
	if r.Status != runs.RunSucceeded {
		t.Fatalf("run %s", r.Status)
	}
}
