package app_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/nats-io/nats.go"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/internal/worker"
)

// heapInUseMiB collects garbage twice (finalizers run between) and returns
// the heap in use (runtime.MemStats.HeapInuse, what the soak reads as
// go_memstats_heap_inuse_bytes) in MiB. With RATH_HEAP_PROFILE_DIR set it
// also writes the heap profile there as name.pprof.
func heapInUseMiB(t *testing.T, name string) float64 {
	t.Helper()
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if dir := os.Getenv("RATH_HEAP_PROFILE_DIR"); dir != "" {
		f, err := os.Create(filepath.Join(dir, name+".pprof"))
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return float64(ms.HeapInuse) / (1 << 20)
}

// TestWorkerHeap reports the heap a worker adds to its process on
// Postgres, idle and with 1,000 sessions in flight at once (a fake OpenAI
// model that answers once all 1,000 requests are waiting on it, 1,000
// slots), and after the load, idle again.
// The worker has its own backend (store with its caches, NATS connection,
// run store), as in `rath worker`; the coordinator runs in the same
// process, and its heap is taken before the worker starts and subtracted.
// The bounds asserted are the goals (64 MiB idle, 128 MiB at load), about
// twice what is measured; idle after the load is where the 64 KiB arena
// block every cached transcript held showed (93 MiB before the fix).
func TestWorkerHeap(t *testing.T) {
	pg := testdb.Postgres(t)
	const sessions = 1000
	// The fake model runs in its own process (this test binary, see
	// gatedModel), so its heap is not counted. Once held, it answers no
	// request until released: the 1,000 steps are then in flight at once
	// however slowly they are submitted.
	model := startGatedModel(t)
	env := map[string]string{"OPENAI_API_KEY": "sk-heap-test", "OPENAI_BASE_URL": model + "/v1"}
	getenv := func(k string) string { return env[k] }
	s := startDev(t, pg, app.DevConfig{Workers: -1, Getenv: getenv})
	ctx := context.Background()

	base := heapInUseMiB(t, "coordinator")
	wb, err := app.OpenBackend(ctx, app.BackendConfig{
		StoreURL: pg,
		Connect:  func() (*nats.Conn, error) { return nats.Connect(s.dev.Backend.NC.ConnectedUrl()) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = wb.Close() })
	w, err := app.NewWorker(ctx, wb, getenv, worker.Config{
		Name: "heap-worker", Slots: sessions, Heartbeat: 5 * time.Second, ShutdownTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(wctx) }()
	t.Cleanup(func() { stop(); <-done })

	// Warm up: one run through, so the worker's lazy state exists.
	const spec = `{"name":"slow","model":"gpt-heap-test"}`
	if r := s.waitRun(t, s.submit(t, spec, "warm up").ID); r.Status != runs.RunSucceeded {
		t.Fatalf("warm-up run: %s: %s", r.Status, r.Error)
	}
	gateModel(t, model, "/hold")
	t.Cleanup(func() { gateModel(t, model, "/release") })
	idle := heapInUseMiB(t, "worker-idle") - base

	ids := make([]string, sessions)
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < sessions; i += 32 {
				var r runs.Run
				if err := s.cl.Do(ctx, "POST", "/v1/runs", map[string]any{"agent": json.RawMessage(spec), "message": fmt.Sprint("session ", i)}, &r); err != nil {
					t.Errorf("submit %d: %v", i, err)
					return
				}
				ids[i] = r.ID
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// At load: once every session is running on the worker.
	db, err := sql.Open("pgx", pg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var running int
	testenv.Eventually(t, 2*time.Minute, "1,000 steps running at once", func() bool {
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM steps WHERE status = 'running' AND worker = 'heap-worker'`).Scan(&running); err != nil {
			t.Fatal(err)
		}
		return running == sessions
	})
	load := heapInUseMiB(t, "worker-load") - base
	gateModel(t, model, "/release")
	for _, id := range ids {
		if r := s.waitRun(t, id); r.Status != runs.RunSucceeded {
			t.Fatalf("run %s: %s", id, r.Status)
		}
	}
	after := heapInUseMiB(t, "worker-after") - base
	t.Logf("worker heap in use: idle %.1f MiB, %d steps running %.1f MiB, idle after %d sessions %.1f MiB (coordinator and test %.1f MiB, subtracted)",
		idle, running, load, sessions, after, base)
	if idle > 64 || load > 128 || after > 64 {
		t.Errorf("worker heap: idle %.1f, at load %.1f, idle after %.1f MiB: over the 64/128/64 MiB goals", idle, load, after)
	}
}

// startGatedModel runs this test binary as gatedModel and returns its URL.
func startGatedModel(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "RATH_TEST_GATED_MODEL=1") // see TestMain
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("gated model: %v", err)
	}
	return strings.TrimSpace(line)
}

func gateModel(t *testing.T, url, op string) {
	t.Helper()
	resp, err := http.Post(url+op, "text/plain", nil)
	if err != nil {
		t.Fatalf("gated model %s: %v", op, err)
	}
	_ = resp.Body.Close()
}
