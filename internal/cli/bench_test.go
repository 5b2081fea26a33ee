package cli

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/bench"
)

func TestBenchRejectsBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--scenario", "steps,forks"}, `scenario "forks": unknown`},
		{[]string{"bench", "--recall-items", "10,x"}, `--recall-items: "x" is not a positive integer`},
		{[]string{"bench", "--duration", "0s"}, "--duration must be positive"},
		{[]string{"bench", "--model-latency", "500ms", "--model-jitter", "600ms"}, "--model-jitter: 600ms is not between 0 and --model-latency (500ms)"},
		{[]string{"bench", "--model-jitter", "-1ms"}, "--model-jitter: -1ms is not between 0"},
		{[]string{"bench", "--server", "http://127.0.0.1:1", "--dev"}, "--server and --dev: choose one"},
		{[]string{"bench", "--cpuprofile", "a", "--cpuprofile-loaded", "b"}, "--cpuprofile and --cpuprofile-loaded: choose one"},
		{[]string{"bench", "--scenario", "lineage", "--cpuprofile-loaded", "b"}, `--scenario "lineage" does not run it`},
		{[]string{"bench", "--process", "w1=pid:1"}, "--process: with --server only"},
		{[]string{"bench", "--server", "http://127.0.0.1:1", "--process", "w1"}, `--process "w1": want NAME=pid:PID or NAME=URL`},
		{[]string{"bench", "--server", "http://127.0.0.1:1", "--process", "w1=pid:x"}, `pid "x" is not a positive integer`},
		{[]string{"bench", "--server", "http://127.0.0.1:1", "--process", "w1=ftp://h/metrics"}, `"ftp://h/metrics" is neither pid:PID nor an http(s) URL`},
	} {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), tc.args, strings.NewReader(""), &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut.String(), tc.want)
		}
	}
}

func TestBenchLineageOnDevWritesJSONAndSVG(t *testing.T) {
	dir := t.TempDir()
	jsonPath, svgDir := filepath.Join(dir, "report.json"), filepath.Join(dir, "svg")
	var out, errOut bytes.Buffer
	code := Main(t.Context(), []string{"bench", "--scenario", "lineage", "--duration", "500ms", "--depth", "20",
		"--lengths", "10,100", "--json", jsonPath, "--svg", svgDir}, strings.NewReader(""), &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "ancestors at depth 20") || !strings.Contains(out.String(), "commits/s") {
		t.Errorf("table:\n%s", out.String())
	}
	if !strings.Contains(errOut.String(), "bench lineage") {
		t.Errorf("no progress lines on stderr: %q", errOut.String())
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Figures []struct {
			Name  string  `json:"name"`
			Value float64 `json:"value"`
		} `json:"figures"`
	}
	if err := json.Unmarshal(b, &rep); err != nil || len(rep.Figures) == 0 {
		t.Fatalf("report: %v, %d figures\n%s", err, len(rep.Figures), b)
	}
	svg, err := os.ReadFile(filepath.Join(svgDir, "load_vs_length.svg"))
	if err != nil || !bytes.HasPrefix(svg, []byte("<svg")) {
		t.Errorf("load_vs_length.svg: %v %.60q", err, svg)
	}
}

// TestBenchProfilesTheLoadedPhase: --cpuprofile-loaded writes a CPU
// profile (gzipped protobuf) whose samples include the workers' steps,
// and from it the report tells the load generator's CPU from the stack's:
// a row, a part of the process's, outside the total, and the CPU per step
// without it, below the whole.
func TestBenchProfilesTheLoadedPhase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loaded.pprof")
	var out, errOut bytes.Buffer
	code := Main(t.Context(), []string{"bench", "--scenario", "steps", "--duration", "3s", "--worker-sweep", "",
		"--cpuprofile-loaded", path}, strings.NewReader(""), &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = fh.Close() }()
	zr, err := gzip.NewReader(fh)
	if err != nil {
		t.Fatalf("profile is not gzipped: %v", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	// The function names are in the profile's string table.
	if !bytes.Contains(raw, []byte("worker.(*Worker).handle")) {
		t.Errorf("the loaded phase's profile (%d bytes) has no worker step in it", len(raw))
	}
	// µs a step in the table's row and the figure named.
	value := func(re string) float64 {
		t.Helper()
		m := regexp.MustCompile(re + `\s+([0-9.]+) µs`).FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("no %q in the report:\n%s", re, out.String())
		}
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	process := value(`rath: this process \([^)]*\)`)
	load := value(`  of which the load generator \([0-9.]+% of the phase's CPU profile[^)]*\)`)
	whole := value(`CPU per step, loaded, Rath \(one process: the store is SQLite in it\)`)
	without := value(`CPU per step, loaded, Rath \(one process: the store is SQLite in it\), the load generator's part taken out`)
	if !(load > 0 && load < process) || math.Abs(whole-without-load) > 1 {
		t.Errorf("load generator %.1f µs of the process's %.1f; CPU per step %.1f, %.1f without it: want a part, taken out of the whole", load, process, whole, without)
	}
}

// TestBenchOneClock: a cluster's latency is split by its workers' event
// stamps only when its processes read this machine's clock: the
// coordinator on a loopback address and every --process a pid here. A
// loopback address alone may be a port forwarded to a remote cluster.
func TestBenchOneClock(t *testing.T) {
	pid := bench.Process{Name: "worker1", Source: "pid:42"}
	metrics := bench.Process{Name: "coordinator", Source: "http://10.0.0.7:9090/metrics"}
	for _, c := range []struct {
		server string
		procs  []bench.Process
		want   bool
	}{
		{"http://127.0.0.1:8080", []bench.Process{pid}, true},
		{"http://localhost:8080", []bench.Process{pid, pid}, true},
		{"http://[::1]:8080", []bench.Process{pid}, true},
		{"http://127.0.0.1:8080", nil, false},                           // port-forwarded, maybe
		{"http://127.0.0.1:8080", []bench.Process{pid, metrics}, false}, // one process elsewhere
		{"http://rath.example.com:8080", []bench.Process{pid}, false},   // another machine
		{"http://10.0.0.7:8080", []bench.Process{pid}, false},           // not loopback
		{"::not a url", []bench.Process{pid}, false},
	} {
		if got := oneClock(c.server, c.procs); got != c.want {
			t.Errorf("oneClock(%q, %v) = %v, want %v", c.server, c.procs, got, c.want)
		}
	}
}
