//go:build soak

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// soakDuration is SOAK_DURATION (default 30m); soakFaultEvery is
// SOAK_FAULT_EVERY (default 5m).
func soakDurations(t *testing.T) (total, every time.Duration) {
	t.Helper()
	parse := func(name string, def time.Duration) time.Duration {
		s := os.Getenv(name)
		if s == "" {
			return def
		}
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("%s=%q: want a positive duration such as 30m", name, s)
		}
		return d
	}
	return parse("SOAK_DURATION", 30*time.Minute), parse("SOAK_FAULT_EVERY", 5*time.Minute)
}

// rssKiB reads VmRSS of a process from /proc.
func rssKiB(pid int) int {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}

// goroutines reads go_goroutines from a Prometheus endpoint.
func goroutines(url string) int { return int(gauge(url, "go_goroutines")) }

// heapMiB reads go_memstats_heap_inuse_bytes from a Prometheus endpoint,
// in MiB: the live heap, which RSS (kept by the runtime after a peak)
// only bounds.
func heapMiB(url string) int {
	v := gauge(url, "go_memstats_heap_inuse_bytes")
	if v < 0 {
		return -1
	}
	return int(v / (1 << 20))
}

type soakSample struct {
	at         time.Duration
	rss        map[string]int
	goroutines map[string]int
	heap       map[string]int // MiB in use
}

// TestSoak measures the cluster's maximum throughput, then runs at half of
// it (at SOAK_RATE runs/s when set) for SOAK_DURATION with a fault every
// SOAK_FAULT_EVERY (rotating: SIGKILL a worker and restart it, restart
// NATS, crash and restart Postgres), sampling every process's RSS (/proc)
// and goroutines (go_goroutines on /metrics). At the end: every run
// succeeded, the invariant checker passes, p50/p99 submit→commit latency
// and the memory and goroutine trends are reported. Run it with `make soak` (SOAK_DURATION=3m for a short one).
func TestSoak(t *testing.T) {
	total, every := soakDurations(t)
	pg := startPrivatePG(t)
	_, env := fakeModel(t, 20*time.Millisecond)
	healthPorts := []int{freePort(t), freePort(t)}
	c := newCluster(t, clusterConfig{workers: 2, env: env, storeURL: pg.URL, workerArgs: []string{"--slots", "4"},
		coordArgs: []string{"--reconcile-interval", "1s", "--stale-after", "10s"}})
	// Give each worker a metrics endpoint (the harness turns it off).
	for i, w := range c.workers {
		w.kill(t)
		w.args = append(w.args, "--health", fmt.Sprintf("127.0.0.1:%d", healthPorts[i]))
		w.start(t)
	}
	db := c.sqlDB()
	cl := c.client()
	ctx := context.Background()

	// 1. The maximum: 400 runs from 16 clients at once.
	const burst = 400
	t0 := time.Now()
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < burst; i += 16 {
				if _, err := submitRun(ctx, cl, fmt.Sprintf("soak max %d", i)); err != nil {
					t.Errorf("submit: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	waitAllEnded(t, db, 5*time.Minute)
	maxRate := float64(burst) / time.Since(t0).Seconds()
	rate := maxRate / 2
	if s := os.Getenv("SOAK_RATE"); s != "" {
		// A fixed rate, to compare two builds on a machine whose maximum
		// moves between runs.
		r, err := strconv.ParseFloat(s, 64)
		if err != nil || r <= 0 {
			t.Fatalf("SOAK_RATE=%q: want a positive number of runs a second", s)
		}
		rate = r
	}
	t.Logf("soak: maximum %.0f runs/s (%d single-step runs, 2 workers × 4 slots, model 20 ms); soaking at %.0f runs/s for %s, a fault every %s",
		maxRate, burst, rate, total, every)

	// 2. Soak at half the maximum.
	var accepted, refused atomic.Int64
	stop := make(chan struct{})
	loaderDone := make(chan struct{})
	go func() {
		defer close(loaderDone)
		tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer tick.Stop()
		sem := make(chan struct{}, 32)
		var inflight sync.WaitGroup
		defer inflight.Wait()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			sem <- struct{}{}
			inflight.Add(1)
			go func() {
				defer inflight.Done()
				defer func() { <-sem }()
				sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				if _, err := submitRun(sctx, cl, fmt.Sprintf("soak %d", i)); err != nil {
					refused.Add(1)
				} else {
					accepted.Add(1)
				}
			}()
		}
	}()

	procs := map[string]*proc{"coordinator": c.coord, "w1": c.workers[0], "w2": c.workers[1]}
	metrics := map[string]string{
		"coordinator": c.server + "/metrics",
		"w1":          fmt.Sprintf("http://127.0.0.1:%d/metrics", healthPorts[0]),
		"w2":          fmt.Sprintf("http://127.0.0.1:%d/metrics", healthPorts[1]),
	}
	var samples []soakSample
	sample := func(at time.Duration) {
		s := soakSample{at: at, rss: map[string]int{}, goroutines: map[string]int{}, heap: map[string]int{}}
		for name, p := range procs {
			if p.running() {
				s.rss[name] = rssKiB(p.cmd.Process.Pid)
			}
			s.goroutines[name] = goroutines(metrics[name])
			s.heap[name] = heapMiB(metrics[name])
		}
		samples = append(samples, s)
	}
	faults := []string{"worker kill", "NATS restart", "Postgres restart"}
	var faultLog []string
	start := time.Now()
	sampleTick := time.NewTicker(10 * time.Second)
	defer sampleTick.Stop()
	nextFault := every
	for n := 0; time.Since(start) < total; {
		<-sampleTick.C
		el := time.Since(start)
		sample(el)
		if el < nextFault {
			continue
		}
		kind := faults[n%len(faults)]
		n++
		nextFault += every
		switch kind {
		case "worker kill":
			i := rand.IntN(len(c.workers))
			w := c.workers[i]
			w.kill(t)
			w.start(t)
			kind = fmt.Sprintf("worker kill (w%d)", i+1)
		case "NATS restart":
			c.stopNATS()
			c.startNATS()
		case "Postgres restart":
			pg.crash()
			pg.start()
		}
		faultLog = append(faultLog, fmt.Sprintf("%s at %s", kind, el.Round(time.Second)))
	}
	close(stop)
	<-loaderDone
	waitAllEnded(t, db, 5*time.Minute)
	assertAllSucceeded(t, db, int(accepted.Load()))
	c.checkInvariants()

	// Latency: run created → its step committed, over the soak's runs.
	rows, err := db.Query(`SELECT EXTRACT(EPOCH FROM s.finished_at - r.created_at) FROM runs r JOIN steps s ON s.run_id = r.id
		WHERE r.status = 'succeeded' AND r.created_at >= $1`, start.UTC())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var lat []float64
	for rows.Next() {
		var v float64
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		lat = append(lat, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return time.Duration(lat[min(len(lat)-1, int(p*float64(len(lat))))] * float64(time.Second)).Round(time.Millisecond)
	}
	t.Logf("soak: %s, faults: %s", total, strings.Join(faultLog, "; "))
	t.Logf("soak: runs accepted %d (refused while a dependency was down: %d), all succeeded, lost 0; submit→commit p50 %s, p99 %s, max %s",
		accepted.Load(), refused.Load(), q(0.5), q(0.99), q(1))

	// Trends: the first and last third of the samples (a killed worker
	// restarts small, so workers are compared on their own samples).
	third := max(1, len(samples)/3)
	for _, name := range []string{"coordinator", "w1", "w2"} {
		avg := func(ss []soakSample, f func(soakSample) int) float64 {
			sum, n := 0, 0
			for _, s := range ss {
				if v := f(s); v > 0 {
					sum += v
					n++
				}
			}
			if n == 0 {
				return 0
			}
			return float64(sum) / float64(n)
		}
		rss := func(s soakSample) int { return s.rss[name] }
		gr := func(s soakSample) int { return s.goroutines[name] }
		hp := func(s soakSample) int { return s.heap[name] }
		first, last := samples[:third], samples[len(samples)-third:]
		t.Logf("soak: %s RSS %.1f → %.1f MiB, heap in use %.1f → %.1f MiB, goroutines %.0f → %.0f (means of the first and last third of %d samples)",
			name, avg(first, rss)/1024, avg(last, rss)/1024, avg(first, hp), avg(last, hp), avg(first, gr), avg(last, gr), len(samples))
		if g0, g1 := avg(first, gr), avg(last, gr); g0 > 0 && g1 > 2*g0+50 {
			t.Errorf("%s goroutines grew from %.0f to %.0f: a leak", name, g0, g1)
		}
		if h0, h1 := avg(first, hp), avg(last, hp); h0 > 0 && h1 > 2*h0+32 {
			t.Errorf("%s heap in use grew from %.1f to %.1f MiB: a leak", name, h0, h1)
		}
	}
}
