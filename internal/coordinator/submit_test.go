package coordinator_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/app/apptest"
	"github.com/rath-run/rath/internal/coordinator"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/store/pgstore"
	"github.com/rath-run/rath/pkg/store/sqlitestore"
)

// TestSubmitOneTransaction checks that a submit with a message records the
// new session and its run together (Config.SameDatabase, which the dev
// stack and the coordinator binary set): when the run cannot be
// recorded, the session is rolled back with it. The negative control, a coordinator
// without SameDatabase, leaves the session behind.
func TestSubmitOneTransaction(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := t.TempDir()
			url := "sqlite:" + filepath.Join(dir, "rath.db")
			if backend == "postgres" {
				url = testdb.Postgres(t)
			}
			d, err := app.StartDev(ctx, app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", Workers: -1, StoreURL: url})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(d.Close)
			b := d.Backend
			if !b.SubmitInOneTx() {
				t.Errorf("SubmitInOneTx() = false on %s, want true", backend)
			}
			one, err := coordinator.New(b.Store, b.Runs, b.Bus, coordinator.Config{SameDatabase: true})
			if err != nil {
				t.Fatal(err)
			}
			req := coordinator.SubmitRequest{Agent: json.RawMessage(spec), Message: "together"}

			r, err := one.Submit(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.Store.Get(ctx, r.Input); err != nil {
				t.Fatalf("input session %s: %v", r.Input, err)
			}
			got, err := b.Runs.Get(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Input != r.Input || len(got.Steps) != 1 || got.Steps[0].Input != r.Input ||
				got.Steps[0].Status != runs.StepPending || got.Steps[0].ID != r.Steps[0].ID {
				t.Fatalf("stored run %+v, want input %s and one pending step %s on it", got, r.Input, r.Steps[0].ID)
			}

			rejectRuns(t, b.Store, url)
			before := versions(t, b.Store)
			if _, err := one.Submit(ctx, req); err == nil || !strings.Contains(err.Error(), "no runs") {
				t.Fatalf("submit with runs rejected = %v, want the trigger's error", err)
			}
			if after := versions(t, b.Store); after != before {
				t.Fatalf("versions %d → %d after a failed submit, want the session rolled back", before, after)
			}

			// Negative control: two transactions leave the session behind.
			two, err := coordinator.New(b.Store, b.Runs, b.Bus, coordinator.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := two.Submit(ctx, req); err == nil {
				t.Fatal("submit without SameDatabase succeeded with runs rejected")
			}
			if after := versions(t, b.Store); after != before+1 {
				t.Fatalf("versions %d → %d without SameDatabase, want the orphan session", before, after)
			}
			list, err := b.Runs.List(ctx, runs.ListParams{})
			if err != nil || len(list) != 1 {
				t.Fatalf("runs = %d, %v; want only the first", len(list), err)
			}
		})
	}
}

// rejectRuns installs a trigger that fails every insert into runs.
func rejectRuns(t *testing.T, st store.Store, url string) {
	t.Helper()
	ctx := context.Background()
	if sq, ok := st.(*sqlitestore.Store); ok {
		if _, err := sq.DB().ExecContext(ctx,
			`CREATE TRIGGER no_runs BEFORE INSERT ON runs BEGIN SELECT RAISE(ABORT, 'no runs'); END`); err != nil {
			t.Fatal(err)
		}
		return
	}
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`CREATE FUNCTION no_runs() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no runs'; END $$`,
		`CREATE TRIGGER no_runs BEFORE INSERT ON runs FOR EACH ROW EXECUTE FUNCTION no_runs()`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
}

// versions counts the stored versions.
func versions(t *testing.T, st store.Store) int {
	t.Helper()
	n, after := 0, ""
	for {
		p, err := st.List(context.Background(), store.ListParams{After: after, Limit: store.MaxListLimit})
		if err != nil {
			t.Fatal(err)
		}
		n += len(p.Versions)
		if p.Next == "" {
			return n
		}
		after = p.Next
	}
}

// BenchmarkSubmit measures a submit with a message on the embedded SQLite
// store, through the coordinator (spec parse, session and run records, the
// step's publish to embedded NATS, run.submitted): one-tx records the
// session and its run in one write transaction (Config.SameDatabase,
// sqlitestore PutExec), two-tx in two (a Put, then the run's transaction).
//
//	go test -run '^$' -bench Submit -benchmem ./internal/coordinator/
func BenchmarkSubmit(b *testing.B) {
	for _, mode := range []struct {
		name string
		same bool
	}{{"one-tx", true}, {"two-tx", false}} {
		b.Run(mode.name, func(b *testing.B) {
			ctx := context.Background()
			dir := b.TempDir()
			d, err := app.StartDev(ctx, app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", Workers: -1, StoreURL: "sqlite:" + filepath.Join(dir, "rath.db")})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(d.Close)
			c, err := coordinator.New(d.Backend.Store, d.Backend.Runs, d.Backend.Bus, coordinator.Config{SameDatabase: mode.same})
			if err != nil {
				b.Fatal(err)
			}
			req := coordinator.SubmitRequest{Agent: json.RawMessage(spec), Message: "bench"}
			b.ReportAllocs()
			cpu0 := processCPU(b)
			n := 0
			for b.Loop() {
				if _, err := c.Submit(ctx, req); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(n), "cpu-µs/op")
		})
	}
}

// processCPU returns the process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// A submit's run.submitted goes out without asking for an acknowledgement
// (one message less from the server a submit), and still first: a watcher
// of the run from its start sees it before the step's events.
func TestSubmittedAsksNoAcknowledgement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	d := apptest.Dev(t, dir)
	sub, err := d.Backend.NC.SubscribeSync("rath.events.>")
	if err != nil {
		t.Fatal(err)
	}
	r, err := d.Coordinator.Submit(ctx, coordinator.SubmitRequest{Agent: json.RawMessage(spec), Message: "no ack"})
	if err != nil {
		t.Fatal(err)
	}
	var first string
	for {
		m, err := sub.NextMsg(30 * time.Second)
		if err != nil {
			t.Fatalf("the run's events: %v", err)
		}
		if !strings.HasPrefix(m.Subject, "rath.events."+r.ID+".") {
			continue
		}
		typ := strings.TrimPrefix(m.Subject, "rath.events."+r.ID+".")
		if first == "" {
			first = typ
		}
		if typ == "run.submitted" && m.Reply != "" {
			t.Errorf("run.submitted asks for an acknowledgement (reply subject %q)", m.Reply)
		}
		if strings.HasPrefix(typ, "run.") && typ != "run.submitted" {
			break
		}
	}
	if first != "run.submitted" {
		t.Errorf("the run's first event: %s, want run.submitted", first)
	}
}

// TestSubmitPublishesAfterTheCallerLeft: a submit whose caller goes away
// just after its run is committed (a client that hung up) still publishes
// the step's job. The run is committed: left to the reconciler, its step
// would wait StaleAfter (two minutes by default) before it ran.
func TestSubmitPublishesAfterTheCallerLeft(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	d, err := app.StartDev(ctx, app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", Workers: -1, StoreURL: testdb.Postgres(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	b := d.Backend
	caller, leave := context.WithCancel(ctx)
	defer leave()
	g := leavingGraph{Store: b.Store, put: b.Store.(runs.VersionPutter), leave: leave}
	c, err := coordinator.New(g, b.Runs, b.Bus, coordinator.Config{SameDatabase: true})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Submit(caller, coordinator.SubmitRequest{Agent: json.RawMessage(spec), Message: "then hang up"})
	if err != nil {
		t.Fatal(err)
	}
	if caller.Err() == nil {
		t.Fatal("the caller did not leave: the submit did not commit through the graph's PutWith")
	}
	queued, _, err := b.Bus.QueuedSteps(ctx, r.Queue, 100)
	if err != nil {
		t.Fatal(err)
	}
	if !queued[r.Steps[0].ID] {
		t.Fatalf("step %s of a committed run is not queued (queued: %v): it waits for the reconciler", r.Steps[0].ID, queued)
	}
}

// leavingGraph is a graph store whose commits with statements (a submit's
// version and run) end the caller's context once they have committed.
type leavingGraph struct {
	store.Store
	put   runs.VersionPutter
	leave func()
}

func (g leavingGraph) PutWith(ctx context.Context, v *session.Version, after ...pgstore.Stmt) (*session.Version, bool, error) {
	got, ran, err := g.put.PutWith(ctx, v, after...)
	if err == nil {
		g.leave()
	}
	return got, ran, err
}
