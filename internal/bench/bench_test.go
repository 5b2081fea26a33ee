package bench_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/bench"
	"github.com/rath-run/rath/internal/coordinator"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/sandbox/docker"
	"github.com/rath-run/rath/pkg/store/pgstore"
)

func devTarget(t *testing.T, storeURL string, workers int) *bench.Target {
	t.Helper()
	dir := t.TempDir()
	stmts := bench.NewStatementCounter()
	d, err := app.StartDev(pgstore.WithQueryTracer(t.Context(), stmts), app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", StoreURL: storeURL, Workers: workers, Slots: 4, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	cl, err := client.New(d.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	if storeURL == "" {
		storeURL = "sqlite:" + filepath.Join(dir, "rath.db")
	}
	return &bench.Target{Name: "test dev stack", Client: cl, NC: d.Backend.NC, StoreURL: storeURL, Memory: d.Backend.Memory, InProcess: true, Statements: stmts}
}

func shortConfig(t *testing.T, scenarios ...string) bench.Config {
	return bench.Config{
		Scenarios: scenarios, Duration: 600 * time.Millisecond, Concurrency: 4,
		ForkLengths: []int{10, 4100}, Appends: 20, Depth: 30, RecallSizes: []int{50, 200}, Fanout: 3,
		Dir: t.TempDir(), Progress: io.Discard, Getenv: os.Getenv,
	}
}

// decode round-trips the report through its JSON form, as --json writes it.
func decode(t *testing.T, r *bench.Report) (bench.Report, map[string]any) {
	t.Helper()
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var typed bench.Report
	var raw map[string]any
	if err := json.Unmarshal(buf.Bytes(), &typed); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(buf.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	return typed, raw
}

func checkFigures(t *testing.T, r bench.Report, scenarios ...string) {
	t.Helper()
	for _, s := range scenarios {
		n := 0
		for _, f := range r.Figures {
			if f.Scenario != s {
				continue
			}
			n++
			if !(f.Value > 0) || f.Unit == "" {
				t.Errorf("%s: figure %q = %v %q, want a positive value with a unit", s, f.Name, f.Value, f.Unit)
			}
			if f.Limit != "" && !(f.LimitValue > 0 && f.Ratio > 0) {
				t.Errorf("%s: figure %q names limit %q but has value %v, ratio %v", s, f.Name, f.Limit, f.LimitValue, f.Ratio)
			}
		}
		if n == 0 {
			t.Errorf("scenario %s reported no figures", s)
		}
	}
}

func TestRunAllScenariosOnDevStack(t *testing.T) {
	tg := devTarget(t, "", 1)
	tg.StartStack = func(ctx context.Context, workers int) (*bench.Target, func(), error) {
		return devTarget(t, "", workers), func() {}, nil
	}
	cfg := shortConfig(t, "steps", "fork", "lineage", "recall", "fanout")
	cfg.WorkerSweep = []int{1, 2}
	rep, err := bench.Run(t.Context(), tg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, raw := decode(t, rep)
	for _, k := range []string{"started", "elapsed_s", "target", "machine", "limits", "figures", "series", "scenarios"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("JSON report has no %q field", k)
		}
	}
	for _, name := range []string{bench.LimitCommit, bench.LimitJetStream} {
		i := slices.IndexFunc(r.Limits, func(l bench.Limit) bool { return l.Name == name })
		if i < 0 || !(r.Limits[i].Value > 0) {
			t.Errorf("limit %q missing or not positive: %+v", name, r.Limits)
		}
	}
	checkFigures(t, r, "steps", "fork", "lineage", "recall", "fanout")
	// The loaded latency split in three means that add up to about the
	// latency (each step's three add up to its latency exactly), and the
	// submit request's round trip, a part of the first.
	figure := func(prefix string) (float64, bool) {
		i := slices.IndexFunc(r.Figures, func(f bench.Figure) bool { return f.Scenario == "steps" && strings.HasPrefix(f.Name, prefix) })
		if i < 0 {
			return 0, false
		}
		return r.Figures[i].Value, true
	}
	if _, ok := figure(fmt.Sprintf("steps/s, %d in flight, the phase's second half", cfg.Concurrency)); !ok {
		t.Errorf("no steady rate of the loaded phase: %+v", r.Figures)
	}
	// Unprofiled (the default), the load generator's part is not
	// estimated: the profiler's cost would be in every figure.
	if slices.ContainsFunc(r.CPU, func(c bench.ProcessCPU) bool { return strings.Contains(c.Process, "load generator (") }) {
		t.Errorf("a load generator's share without a profile of the loaded phase: %+v", r.CPU)
	}
	// Both phases, serial and loaded, are split.
	for _, phase := range []string{"serial", "loaded"} {
		var split float64
		for _, name := range []string{"mean: submit → step started", "mean: step started → committed", "mean: committed → step.committed seen"} {
			v, ok := figure(phase + ", " + name)
			if !ok || !(v > 0) {
				t.Errorf("%s, %s: %v (present %v), want a positive mean", phase, name, v, ok)
			}
			split += v
		}
		if req, ok := figure(phase + ", mean: of which the submit request"); !ok || !(req > 0) {
			t.Errorf("%s: submit request's round trip: %v (present %v), want a positive mean", phase, req, ok)
		}
		p50, _ := figure(phase + " submit→commit p50")
		p99, _ := figure(phase + " submit→commit p99")
		if !(split >= p50/4 && split <= p99) {
			t.Errorf("%s: the latency's four parts add up to %.3f ms; the latency's p50 is %.3f ms, its p99 %.3f ms", phase, split, p50, p99)
		}
	}
	// steps/s is shown as a ratio to the commit limit.
	if !slices.ContainsFunc(r.Figures, func(f bench.Figure) bool {
		return f.Scenario == "steps" && f.Unit == "steps/s" && f.Limit == bench.LimitCommit && f.Ratio > 0
	}) {
		t.Error("no steps/s figure against the commit limit")
	}
	for _, want := range []string{"steps_vs_workers", "fork_vs_length", "storage_vs_appends", "load_vs_length", "recall_vs_items"} {
		i := slices.IndexFunc(r.Series, func(s bench.Series) bool { return s.Name == want })
		if i < 0 {
			t.Errorf("no %s series", want)
			continue
		}
		s := r.Series[i]
		if len(s.Points) < 2 {
			t.Errorf("%s: %d points, want at least 2", want, len(s.Points))
		}
		for i, p := range s.Points[1:] {
			switch {
			case want == "storage_vs_appends":
				// The store grows by whole pages: flat between page
				// allocations, never shrinking, grown by the end.
				if p.Y < s.Points[i].Y || !(p.X > s.Points[i].X) {
					t.Errorf("%s: %+v after %+v", want, p, s.Points[i])
				}
			case !(p.X > 0 && p.Y > 0):
				t.Errorf("%s: point %+v is not positive", want, p)
			}
		}
		if last := s.Points[len(s.Points)-1]; !(last.Y > 0) {
			t.Errorf("%s: last point %+v is not positive", want, last)
		}
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "×") || !strings.Contains(table.String(), bench.LimitCommit) {
		t.Errorf("table shows no ratios:\n%s", table.String())
	}
}

func TestStepsOnPostgresMeasuresPgbench(t *testing.T) {
	tg := devTarget(t, testdb.Postgres(t), 1)
	rep, err := bench.Run(t.Context(), tg, shortConfig(t, "steps"))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := decode(t, rep)
	i := slices.IndexFunc(r.Limits, func(l bench.Limit) bool { return l.Name == bench.LimitCommit })
	if i < 0 || !strings.Contains(r.Limits[i].How, "Postgres") || !(r.Limits[i].Value > 0) {
		t.Fatalf("no Postgres commit limit: %+v", r.Limits)
	}
	if !slices.ContainsFunc(r.Limits, func(l bench.Limit) bool { return l.Name == bench.LimitPgbench && l.Value > 0 }) &&
		!slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, "pgbench not found") }) {
		t.Errorf("neither a pgbench limit nor a note saying why not: %+v %q", r.Limits, r.Notes)
	}
	checkFigures(t, r, "steps")
	// CPU per step for this process and the (local) Postgres backends,
	// and the statements a step makes, counted by the tracer.
	for _, want := range []string{"rath: this process", "postgres: backends", "total"} {
		j := slices.IndexFunc(r.CPU, func(c bench.ProcessCPU) bool { return strings.HasPrefix(c.Process, want) })
		if j < 0 || r.CPU[j].NA != "" || !(r.CPU[j].PerStepUS > 0) {
			t.Errorf("CPU per step of %q: not measured (all: %+v)", want, r.CPU)
		}
	}
	// The collector's share of this process: a part of its row, not a
	// second count in the total.
	self := slices.IndexFunc(r.CPU, func(c bench.ProcessCPU) bool { return strings.HasPrefix(c.Process, "rath: this process") })
	j := slices.IndexFunc(r.CPU, func(c bench.ProcessCPU) bool { return strings.Contains(c.Process, "of which Go's garbage collector") })
	switch {
	case j < 0 || self < 0:
		t.Errorf("no collector row under this process's: %+v", r.CPU)
	case r.CPU[j].InTotal || !(r.CPU[j].PerStepUS >= 0) || r.CPU[j].PerStepUS > r.CPU[self].PerStepUS ||
		!strings.Contains(r.CPU[j].Process, "GOGC=") || !strings.Contains(r.CPU[j].Process, "collections per 1,000 steps)"):
		t.Errorf("collector row %+v against this process's %+v", r.CPU[j], r.CPU[self])
	}
	i = slices.IndexFunc(r.Figures, func(f bench.Figure) bool { return strings.HasPrefix(f.Name, "Postgres statements per step") })
	// A step is at least submit's commit, StartStep and the version's commit.
	if i < 0 || !(r.Figures[i].Value >= 3) || !strings.Contains(r.Figures[i].Name, "pgx tracer") {
		t.Errorf("statements per step: %+v", r.Figures)
	}
	// A step writes at least its run, its step and two versions with
	// their index entries: some kilobytes of WAL.
	i = slices.IndexFunc(r.Figures, func(f bench.Figure) bool { return strings.HasPrefix(f.Name, "Postgres WAL per step") })
	if i < 0 || !(r.Figures[i].Value > 1000) || r.Figures[i].Unit != "bytes" {
		t.Errorf("WAL per step: %+v", r.Figures)
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "CPU PER STEP") {
		t.Errorf("the table has no CPU per step section:\n%s", table.String())
	}
}

func TestStepsOnARemoteTargetSaysWhatIsNotMeasured(t *testing.T) {
	tg := devTarget(t, testdb.Postgres(t), 1)
	tg.InProcess, tg.OneClock, tg.Statements = false, false, nil
	rep, err := bench.Run(t.Context(), tg, shortConfig(t, "steps"))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := decode(t, rep)
	// Another machine's clock: no latency is split by its event stamps.
	if i := slices.IndexFunc(r.Figures, func(f bench.Figure) bool { return strings.Contains(f.Name, ", mean: ") }); i >= 0 {
		t.Errorf("a split latency on a target of another clock: %+v", r.Figures[i])
	}
	if !slices.ContainsFunc(r.CPU, func(c bench.ProcessCPU) bool {
		return strings.HasPrefix(c.NA, "n/a (remote") && strings.HasPrefix(c.Process, "rath")
	}) {
		t.Errorf("no n/a (remote) row for the Rath processes: %+v", r.CPU)
	}
	if slices.ContainsFunc(r.CPU, func(c bench.ProcessCPU) bool { return strings.HasPrefix(c.Process, "total") }) {
		t.Errorf("a total without the Rath processes: %+v", r.CPU)
	}
}

func TestSandboxAgainstDockerExec(t *testing.T) {
	testenv.RequireDocker(t, docker.DefaultImage)
	tg := devTarget(t, "", 1)
	cfg := shortConfig(t, "sandbox")
	cfg.Duration = 2 * time.Second
	rep, err := bench.Run(t.Context(), tg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := decode(t, rep)
	if !slices.ContainsFunc(r.Limits, func(l bench.Limit) bool { return l.Name == bench.LimitDockerCLI && l.Value > 0 }) {
		t.Errorf("no docker exec limit: %+v", r.Limits)
	}
	checkFigures(t, r, "sandbox")
}

func TestRecallWithoutMemoryIsSkippedWithANote(t *testing.T) {
	tg := devTarget(t, "", 1)
	tg.Memory = nil
	rep, err := bench.Run(t.Context(), tg, shortConfig(t, "recall"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Notes) == 0 || !strings.Contains(strings.Join(rep.Notes, "\n"), "recall: skipped: the target has no memory store") {
		t.Errorf("notes = %q", rep.Notes)
	}
}

func TestParseScenarios(t *testing.T) {
	got, err := bench.ParseScenarios("fanout, steps,steps")
	if err != nil || !slices.Equal(got, []string{"steps", "fanout"}) {
		t.Errorf("ParseScenarios = %v, %v", got, err)
	}
	all, err := bench.ParseScenarios("all")
	if err != nil || !slices.Equal(all, bench.Scenarios) {
		t.Errorf("all = %v, %v", all, err)
	}
	if _, err := bench.ParseScenarios("steps,forks"); err == nil || !strings.Contains(err.Error(), `"forks"`) {
		t.Errorf("unknown scenario: err = %v, want it named", err)
	}
}

func FuzzParseScenarios(f *testing.F) {
	for _, s := range []string{"all", "steps,fork", "", ",", "steps,,x", "lineage, recall "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := bench.ParseScenarios(s)
		if err != nil {
			return
		}
		for _, g := range got {
			if !slices.Contains(bench.Scenarios, g) {
				t.Fatalf("%q gave unknown scenario %q", s, g)
			}
		}
	})
}

func TestPlotIsWellFormedSVG(t *testing.T) {
	for _, s := range []bench.Series{
		{Name: "x", Title: "a < b & c", XLabel: "items", YLabel: "ms", Points: []bench.Point{{0, 0}, {1000, 1.5}, {100000, 7.2}}},
		{Name: "empty", Title: "nothing"},
		{Name: "flat", Title: "zero", Points: []bench.Point{{1, 0}, {2, 0}}},
	} {
		svg := bench.Plot(s)
		dec := xml.NewDecoder(bytes.NewReader(svg))
		circles := 0
		for {
			tok, err := dec.Token()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: not well-formed XML: %v\n%s", s.Name, err, svg)
			}
			if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "circle" {
				circles++
			}
		}
		if circles != len(s.Points) {
			t.Errorf("%s: %d markers, want %d", s.Name, circles, len(s.Points))
		}
		if strings.Contains(string(svg), "NaN") || strings.Contains(string(svg), "Inf") {
			t.Errorf("%s: NaN or Inf in the SVG", s.Name)
		}
	}
}

// Without a NATS connection (--server without --nats) steps are timed
// through the API's step long polls, and the JetStream limit is noted as
// not measured. More runs are in flight than a tenant may hold event
// streams (100): the bench waited through those, and stopped on the
// 101st's 429.
func TestStepsWithoutNATS(t *testing.T) {
	tg := devTarget(t, "", 1)
	tg.NC = nil
	cfg := shortConfig(t, "steps", "fanout")
	cfg.Concurrency = coordinator.DefaultEventStreamsPerTenant + 20
	cfg.Duration = 6 * time.Second // long enough for steps to end in the phase's second half, under -race on a loaded 2-vCPU machine too (3 s saw none there)
	rep, err := bench.Run(t.Context(), tg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := decode(t, rep)
	checkFigures(t, r, "steps", "fanout")
	if slices.ContainsFunc(r.Figures, func(f bench.Figure) bool { return strings.HasPrefix(f.Name, "loaded, mean:") }) {
		t.Error("the latency split without the events' stamps from NATS")
	}
	if slices.ContainsFunc(r.Limits, func(l bench.Limit) bool { return l.Name == bench.LimitJetStream }) {
		t.Errorf("a JetStream limit without a connection: %+v", r.Limits)
	}
	if !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, "JetStream limit is not measured") }) {
		t.Errorf("notes = %q", r.Notes)
	}
}

// TestStepsWithToolRounds: with ToolRounds the steps scenario's agent
// calls write_workspace_file in that many rounds per step: every step
// version holds that many tool results.
func TestStepsWithToolRounds(t *testing.T) {
	tg := devTarget(t, "", 1)
	cfg := shortConfig(t, "steps")
	cfg.ToolRounds = 2
	rep, err := bench.Run(t.Context(), tg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := decode(t, rep)
	checkFigures(t, r, "steps")
	db, err := sql.Open("sqlite", "file:"+strings.TrimPrefix(tg.StoreURL, "sqlite:")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var steps, results int
	if err := db.QueryRow(`SELECT COUNT(*) FROM versions WHERE op = 'step'`).Scan(&steps); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT COUNT(*) FROM chunks WHERE kind = 'tool_result' AND payload LIKE '%bytes_written%'`).Scan(&results); err != nil {
		t.Fatal(err)
	}

	if steps == 0 || results != 2*steps {
		t.Fatalf("%d step versions hold %d successful tool results, want 2 each", steps, results)
	}
}
