package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/bus/bustest"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/session"
)

// instantSpec is the scripted model with no delay and no tools: a step is
// pure spine (API, JetStream, worker, store).
const instantSpec = `{"name":"bench","model":"scripted","script":[{"content":"ok"}]}`

// BenchmarkSpine measures the execution spine end to end with the instant
// scripted model: runs submitted through the HTTP API, one step each,
// executed by in-process workers of the dev stack (embedded NATS), on the
// embedded SQLite store and on Postgres, with 1 and 2 workers.
//
//   - serial: one run at a time; submit→commit latency unloaded.
//   - loaded: 32 submitters at once; steps/s, and latency under load.
//
// Metrics: steps/s, and p50-ms/p99-ms of submit→commit: from the client's
// POST /v1/runs to the arrival of the step.committed event, which the
// worker publishes after the version and the step record are committed
// (so the figure slightly overstates the commit latency).
//
// Run it with the limits below in the same invocation:
//
//	go test -run '^$' -bench 'Spine|Limits' -benchtime 2000x ./internal/app/
func BenchmarkSpine(b *testing.B) {
	stores := []struct {
		name string
		url  func(b *testing.B) string
	}{
		{"sqlite", func(b *testing.B) string { return "sqlite:" + filepath.Join(b.TempDir(), "rath.db") }},
		{"postgres", func(b *testing.B) string { return testdb.Postgres(b) }},
	}
	for _, st := range stores {
		for _, workers := range []int{1, 2} {
			for _, mode := range []struct {
				name        string
				concurrency int
			}{{"serial", 1}, {"loaded", 32}} {
				b.Run(fmt.Sprintf("%s/workers=%d/%s", st.name, workers, mode.name), func(b *testing.B) {
					benchSpine(b, st.url(b), workers, mode.concurrency)
				})
			}
		}
	}
}

// commitWatch turns step.committed events into per-run arrival times.
type commitWatch struct {
	mu      sync.Mutex
	arrived map[string]chan time.Time
}

func (w *commitWatch) ch(runID string) chan time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	c, ok := w.arrived[runID]
	if !ok {
		c = make(chan time.Time, 1)
		w.arrived[runID] = c
	}
	return c
}

func benchSpine(b *testing.B, storeURL string, workers, concurrency int) {
	ctx := context.Background()
	d, err := app.StartDev(ctx, app.DevConfig{Dir: b.TempDir(), Addr: "127.0.0.1:0", StoreURL: storeURL, Workers: workers, Slots: 8})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(d.Close)
	cl, err := client.New(d.URL, "")
	if err != nil {
		b.Fatal(err)
	}
	watch := &commitWatch{arrived: map[string]chan time.Time{}}
	// A one-step run's commit comes in one message with the run's end, on
	// the end's subject, when the step ends within the worker's linger.
	seen := func(m *nats.Msg) {
		now := time.Now()
		es, err := bus.DecodeEvents(m.Subject, m.Data)
		if err != nil {
			return
		}
		for _, e := range es {
			if e.Type == "step.committed" {
				select {
				case watch.ch(e.RunID) <- now:
				default:
				}
			}
		}
	}
	for _, typ := range []string{"step.committed", "run.completed"} {
		sub, err := d.Backend.NC.Subscribe(bus.EventSubject("*", typ), seen)
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	if err := d.Backend.NC.Flush(); err != nil {
		b.Fatal(err)
	}

	one := func() (time.Duration, error) {
		t0 := time.Now()
		var r runs.Run
		if err := cl.Do(ctx, "POST", "/v1/runs", map[string]any{"agent": json.RawMessage(instantSpec), "message": "go"}, &r); err != nil {
			return 0, err
		}
		select {
		case t1 := <-watch.ch(r.ID):
			return t1.Sub(t0), nil
		case <-time.After(time.Minute):
			return 0, fmt.Errorf("run %s: no step.committed within a minute", r.ID)
		}
	}
	// Warm up: connections, prepared statements, the consumer.
	for range 20 {
		if _, err := one(); err != nil {
			b.Fatal(err)
		}
	}

	lat := make([]time.Duration, 0, b.N)
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	b.ResetTimer()
	for range b.N {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			d, err := one()
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			lat = append(lat, d)
		}()
	}
	wg.Wait()
	b.StopTimer()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	reportLatency(b, lat)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
}

func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	q := func(p float64) float64 {
		i := min(int(p*float64(len(lat))), len(lat)-1)
		return float64(lat[i].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkLimits measures, in the same run as BenchmarkSpine, the two
// limits its figures are read against:
//
//   - pgbench: Postgres' single-row INSERT commit rate on the test cluster
//     (1 client, and 8 clients, where commits share WAL flushes); each
//     commit is fsync'd, as Rath's are.
//   - jetstream: a job's raw bus round trip — publish (PubAck), fetch,
//     confirmed ack — on the embedded server over the in-process
//     connection, file storage, as the dev stack runs it.
func BenchmarkLimits(b *testing.B) {
	for _, clients := range []int{1, 8} {
		b.Run(fmt.Sprintf("pgbench/clients=%d", clients), func(b *testing.B) { benchPgbench(b, clients) })
	}
	b.Run("jetstream/publish-fetch-ack", func(b *testing.B) {
		bs, _, _ := bustest.NewWith(b, bustest.Options{InProcess: true})
		ctx := context.Background()
		cons, err := bs.Consumer(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		job := bus.Job{RunID: "run_bench", Queue: "bench", Input: session.NewID().String(), Target: json.RawMessage(instantSpec)}
		i := 0
		for b.Loop() {
			job.StepID = "s-" + strconv.Itoa(i)
			i++
			if _, err := bs.Publish(ctx, job, nil); err != nil {
				b.Fatal(err)
			}
			ds, err := cons.Fetch(ctx, 1, time.Second)
			if err != nil || len(ds) != 1 {
				b.Fatalf("fetch = %d, %v", len(ds), err)
			}
			if err := ds[0].Ack(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	})
}

var tpsRE = regexp.MustCompile(`tps = ([0-9.]+)`)

// benchPgbench runs pgbench once for 3 seconds with a one-row INSERT per
// transaction and reports its commit rate. It needs the pgbench binary of
// the test cluster (RATH_TEST_PG_BIN, or Debian's /usr/lib/postgresql/*).
func benchPgbench(b *testing.B, clients int) {
	url := testdb.Postgres(b)
	pgbench := filepath.Join(os.Getenv("RATH_TEST_PG_BIN"), "pgbench")
	if os.Getenv("RATH_TEST_PG_BIN") == "" {
		matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
		if len(matches) == 0 {
			b.Fatal("pgbench not found: set RATH_TEST_PG_BIN (scripts/testpg.sh prints it)")
		}
		pgbench = matches[len(matches)-1]
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	_, err = conn.Exec(ctx, `CREATE TABLE bench_commit (id bigserial PRIMARY KEY, v int NOT NULL, at timestamptz NOT NULL DEFAULT now())`)
	_ = conn.Close(ctx)
	if err != nil {
		b.Fatal(err)
	}
	script := filepath.Join(b.TempDir(), "insert.sql")
	if err := os.WriteFile(script, []byte("INSERT INTO bench_commit (v) VALUES (1);\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	// One 3-second pgbench run whatever b.N is: pgbench measures itself.
	out, err := exec.CommandContext(ctx, pgbench, "-n", "-c", strconv.Itoa(clients), "-j", strconv.Itoa(min(clients, 2)),
		"-T", "3", "-f", script, url).CombinedOutput()
	if err != nil {
		b.Fatalf("pgbench: %v\n%s", err, out)
	}
	m := tpsRE.FindSubmatch(out)
	if m == nil {
		b.Fatalf("pgbench printed no tps:\n%s", out)
	}
	tps, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(tps, "commits/s")
	b.ReportMetric(0, "ns/op")
}
