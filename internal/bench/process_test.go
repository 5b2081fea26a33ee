package bench_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/bench"
	"github.com/rath-run/rath/internal/testdb"
)

func TestParseMetricsCPU(t *testing.T) {
	for _, tc := range []struct {
		text string
		want time.Duration
		err  string
	}{
		{"# HELP process_cpu_seconds_total x\n# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 12.5\n", 12500 * time.Millisecond, ""},
		{"process_cpu_seconds_total 3\ngo_goroutines 9\n", 3 * time.Second, ""},
		{"go_goroutines 9\n", 0, "no process_cpu_seconds_total"},
		{"process_cpu_seconds_total{a=\"1\"} 1\nprocess_cpu_seconds_total{a=\"2\"} 2\n", 3 * time.Second, ""},
		{"process_cpu_seconds_total -1\n", 0, "not a CPU time"},
		{"process_cpu_seconds_total NaN\n", 0, "not a CPU time"},
		{"process_cpu_seconds_total 1e300\n", 0, "not a CPU time"},
		{"process_cpu_seconds_total{\n", 0, "metrics:"},
	} {
		got, err := bench.ParseMetricsCPU(strings.NewReader(tc.text))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, %v; want an error with %q", tc.text, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %v, %v; want %v", tc.text, got, err, tc.want)
		}
	}
}

func FuzzParseMetricsCPU(f *testing.F) {
	f.Add("process_cpu_seconds_total 12.5\n")
	f.Add("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total{a=\"b\"} 1e3\n")
	f.Add("process_cpu_seconds_total +Inf\n")
	f.Fuzz(func(t *testing.T, text string) {
		d, err := bench.ParseMetricsCPU(strings.NewReader(text))
		if err == nil && d < 0 {
			t.Fatalf("%q: negative CPU time %v", text, d)
		}
	})
}

func TestParseProcess(t *testing.T) {
	p, err := bench.ParseProcess(fmt.Sprintf("me=pid:%d", os.Getpid()), nil)
	if err != nil || p.Name != "me" || p.Source != fmt.Sprintf("pid:%d", os.Getpid()) {
		t.Fatalf("ParseProcess = %+v, %v", p, err)
	}
	if d, err := p.Read(t.Context()); err != nil || d <= 0 {
		t.Errorf("this process's CPU time: %v, %v", d, err)
	}
	gone, err := bench.ParseProcess("gone=pid:999999999", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gone.Read(t.Context()); err == nil || !strings.Contains(err.Error(), "999999999") {
		t.Errorf("a process that is not there: %v, want an error naming it", err)
	}
	for _, bad := range []string{"", "=pid:1", "w1=", "w1", "w1=pid:0", "w1=pid:-3", "w1=localhost:7421/metrics", "w1=http:///metrics"} {
		if _, err := bench.ParseProcess(bad, nil); err == nil {
			t.Errorf("ParseProcess(%q): no error", bad)
		}
	}
}

// TestStepsOnARemoteTargetReportsTheNamedProcesses: with Processes, the
// remote target's CPU per step has a row for each named process (one read
// from /proc, one from a /metrics endpoint) in the total with the Postgres
// backends'; a process that cannot be read is n/a, and then there is no
// total.
func TestStepsOnARemoteTargetReportsTheNamedProcesses(t *testing.T) {
	var reads atomic.Int64
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		// 0.25 s more CPU at each read: the phase's reads differ by it.
		fmt.Fprintf(w, "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %g\n", 0.25*float64(reads.Add(1)))
	}))
	t.Cleanup(metrics.Close)
	run := func(procs ...string) bench.Report {
		t.Helper()
		tg := devTarget(t, testdb.Postgres(t), 1)
		tg.InProcess, tg.Statements = false, nil
		for _, s := range procs {
			p, err := bench.ParseProcess(s, nil)
			if err != nil {
				t.Fatal(err)
			}
			tg.Processes = append(tg.Processes, p)
		}
		rep, err := bench.Run(context.Background(), tg, shortConfig(t, "steps"))
		if err != nil {
			t.Fatal(err)
		}
		r, _ := decode(t, rep)
		return r
	}
	r := run(fmt.Sprintf("stack=pid:%d", os.Getpid()), "counter="+metrics.URL+"/metrics")
	for _, want := range []string{"stack (pid:", "counter (http://", "postgres: backends", "total"} {
		j := slices.IndexFunc(r.CPU, func(c bench.ProcessCPU) bool { return strings.HasPrefix(c.Process, want) })
		if j < 0 || r.CPU[j].NA != "" || !(r.CPU[j].PerStepUS > 0) {
			t.Errorf("CPU per step of %q: not measured (all: %+v)", want, r.CPU)
		}
	}
	if !slices.ContainsFunc(r.Figures, func(f bench.Figure) bool {
		return f.Name == "CPU per step, loaded, the processes named + Postgres backends" && f.Value > 0
	}) {
		t.Errorf("no CPU per step figure for the named processes: %+v", r.Figures)
	}

	r = run("gone=pid:999999999")
	if !slices.ContainsFunc(r.CPU, func(c bench.ProcessCPU) bool {
		return strings.HasPrefix(c.Process, "gone (pid:999999999)") && strings.HasPrefix(c.NA, "n/a (")
	}) {
		t.Errorf("no n/a row for a process that cannot be read: %+v", r.CPU)
	}
	if slices.ContainsFunc(r.CPU, func(c bench.ProcessCPU) bool { return strings.HasPrefix(c.Process, "total") }) {
		t.Errorf("a total without a named process: %+v", r.CPU)
	}
}
