package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/bench"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/memory"
	"github.com/rath-run/rath/pkg/memory/pgmem"
	"github.com/rath-run/rath/pkg/memory/sqlitemem"
	"github.com/rath-run/rath/pkg/store/pgstore"
	"github.com/rath-run/rath/pkg/store/sqlitestore"
)

// maxBenchToolRounds is the most --tool-rounds takes: the agent's rounds
// (tool rounds and the answer) stay within limits.max_tool_rounds' default
// of 64.
const maxBenchToolRounds = 63

type benchFlags struct {
	server, token, store, natsURL string
	dev                           bool
	scenarios                     string
	duration, latency, jitter     time.Duration
	concurrency, workers          int
	toolRounds                    int
	slots, fanout, depth, appends int
	forkLengths, recallSizes      string
	workerSweep                   string
	jsonPath, svgDir, dir         string
	cpuProfile                    string
	loadedProfile                 string
	output                        string
	processes                     []string
}

func newBenchCmd(env *Env) *cobra.Command {
	var f benchFlags
	c := &cobra.Command{
		Use:   "bench",
		Short: "load-test a cluster (or an in-process dev stack) and report each figure against the machine's limits",
		Long: `bench runs named scenarios against a coordinator and prints a table of
figures, each with its ratio to the limit it is bounded by, measured in the
same run: the store's single-row commit rate (an in-process INSERT+COMMIT
loop, and pgbench when present), JetStream's publish+ack rate, a bare
` + "`docker exec`" + `; or, where there is no machine limit, the docs/architecture.md §10 budget.

Scenarios: steps, fork, lineage, recall, sandbox, fanout (or all).

Targets: --dev (the default) starts an in-process dev stack (embedded NATS,
SQLite, or the store --store names); --server URL measures a running
cluster, and with --store and --nats also its limits and memory recall;
--process names its processes (coordinator, workers, NATS), whose CPU per
step the steps scenario then reports with the Postgres backends'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd.Context(), env, &f, cmd.Flags().Changed("dev"))
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.server, "server", "", "coordinator URL of a running cluster (instead of --dev)")
	fl.StringVar(&f.token, "token", "", "API bearer token (env RATH_TOKEN)")
	fl.BoolVar(&f.dev, "dev", true, "start an in-process dev stack (default unless --server)")
	fl.StringVar(&f.store, "store", "", "store URL: the dev stack's store with --dev; with --server, the cluster's (for the commit limit and recall)")
	fl.StringVar(&f.natsURL, "nats", "", "with --server: the cluster's NATS URL (step timing by events, not by long polls of the API; JetStream limit)")
	fl.StringVar(&f.scenarios, "scenario", "all", "scenarios, comma-separated: steps, fork, lineage, recall, sandbox, fanout, all")
	fl.DurationVar(&f.duration, "duration", 10*time.Second, "measuring time per scenario")
	fl.DurationVar(&f.latency, "model-latency", 0, "the scripted model's latency per reply (0: instant)")
	fl.DurationVar(&f.jitter, "model-jitter", 0, "spread each reply's latency uniformly over --model-latency ± this (at most --model-latency)")
	fl.IntVar(&f.concurrency, "concurrency", 16, "submissions in flight in loaded phases")
	fl.IntVar(&f.toolRounds, "tool-rounds", 0, "the bench agent's tool rounds per step (write_workspace_file; 0: one model reply)")
	fl.IntVar(&f.workers, "workers", 2, "with --dev: in-process workers")
	fl.IntVar(&f.slots, "slots", 8, "with --dev: concurrent steps per worker")
	fl.StringVar(&f.workerSweep, "worker-sweep", "1,2,4", "with --dev: worker counts for the steps/s vs workers plot (empty: none)")
	fl.IntVar(&f.fanout, "fanout", 8, "branches per fan-out round")
	fl.IntVar(&f.depth, "depth", 1000, "length of the chain the lineage scenario walks")
	fl.IntVar(&f.appends, "appends", 500, "appends in the storage growth series")
	fl.StringVar(&f.forkLengths, "lengths", "10,1000,10000,50000", "session lengths (chunks) for fork and load costs")
	fl.StringVar(&f.recallSizes, "recall-items", "1000,10000,100000", "memory sizes recall is measured at")
	fl.StringVar(&f.jsonPath, "json", "", "write the JSON report to this file")
	fl.StringVar(&f.svgDir, "svg", "", "write the growth plots (SVG) into this directory")
	fl.StringVarP(&f.output, "output", "o", "text", "output format: text (the table) or json (the report --json writes)")
	fl.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the run (with --dev: the whole stack's) to this file")
	fl.StringVar(&f.loadedProfile, "cpuprofile-loaded", "", "write a CPU profile of the steps scenario's loaded phase alone (the phase CPU per step is measured over; with --dev the whole stack's, from which the report tells the load generator's CPU from the stack's; with --server the load generator's) to this file")
	fl.StringVar(&f.dir, "dir", "", "with --dev: state directory (default: a temporary one, removed after)")
	fl.StringArrayVar(&f.processes, "process", nil, "with --server: a cluster process whose CPU per step to report, NAME=pid:PID (on this machine) or NAME=URL of its Prometheus /metrics (process_cpu_seconds_total: the coordinator's and a worker's --health listener serve it); repeat for each")
	return c
}

func intList(flag, s string) ([]int, error) {
	var out []int
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			return nil, &exitError{code: 2, err: fmt.Errorf("--%s: %q is not a positive integer", flag, p)}
		}
		out = append(out, n)
	}
	return out, nil
}

func runBench(ctx context.Context, env *Env, f *benchFlags, devSet bool) error {
	scen, err := bench.ParseScenarios(f.scenarios)
	if err != nil {
		return &exitError{code: 2, err: fmt.Errorf("--scenario: %w", err)}
	}
	if f.server != "" && devSet && f.dev {
		return &exitError{code: 2, err: fmt.Errorf("--server and --dev: choose one")}
	}
	if f.cpuProfile != "" && f.loadedProfile != "" {
		return &exitError{code: 2, err: errors.New("--cpuprofile and --cpuprofile-loaded: choose one (a process runs one CPU profile at a time)")}
	}
	if f.loadedProfile != "" && !slices.Contains(scen, "steps") {
		return &exitError{code: 2, err: fmt.Errorf("--cpuprofile-loaded profiles the steps scenario's loaded phase; --scenario %q does not run it", f.scenarios)}
	}
	if len(f.processes) > 0 && f.server == "" {
		return &exitError{code: 2, err: errors.New("--process: with --server only (a dev stack is this process, measured as a whole)")}
	}
	if f.duration <= 0 {
		return &exitError{code: 2, err: fmt.Errorf("--duration must be positive, not %s", f.duration)}
	}
	if f.jitter < 0 || f.jitter > f.latency {
		return &exitError{code: 2, err: fmt.Errorf("--model-jitter: %s is not between 0 and --model-latency (%s)", f.jitter, f.latency)}
	}
	if f.toolRounds < 0 || f.toolRounds > maxBenchToolRounds {
		return &exitError{code: 2, err: fmt.Errorf("--tool-rounds: %d is not between 0 and %d", f.toolRounds, maxBenchToolRounds)}
	}
	cfg := bench.Config{
		Scenarios: scen, Duration: f.duration, Concurrency: f.concurrency, ModelLatency: f.latency, ModelJitter: f.jitter, ToolRounds: f.toolRounds,
		Fanout: f.fanout, Depth: f.depth, Appends: f.appends, Getenv: os.Getenv, Progress: env.Err, TTY: isTerminal(env.Err),
	}
	for _, l := range []struct {
		flag, val string
		dst       *[]int
	}{{"lengths", f.forkLengths, &cfg.ForkLengths}, {"recall-items", f.recallSizes, &cfg.RecallSizes}, {"worker-sweep", f.workerSweep, &cfg.WorkerSweep}} {
		if *l.dst, err = intList(l.flag, l.val); err != nil {
			return err
		}
	}
	scratch, err := os.MkdirTemp("", "rath-bench-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(scratch) }()
	cfg.Dir = scratch

	var target *bench.Target
	if f.server != "" {
		t, closeT, err := remoteTarget(ctx, f)
		if err != nil {
			return err
		}
		defer closeT()
		target = t
	} else {
		dir := f.dir
		if dir == "" {
			dir = filepath.Join(scratch, "dev")
		}
		start := func(ctx context.Context, dir string, workers int) (*bench.Target, func(), error) {
			return devTarget(ctx, dir, f.store, workers, f.slots)
		}
		t, stop, err := start(ctx, dir, f.workers)
		if err != nil {
			return err
		}
		defer stop()
		n := 0
		t.StartStack = func(ctx context.Context, workers int) (*bench.Target, func(), error) {
			n++
			return start(ctx, filepath.Join(scratch, fmt.Sprintf("sweep-%d", n)), workers)
		}
		target = t
	}
	if f.loadedProfile != "" {
		fh, err := os.Create(f.loadedProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile-loaded: %w", err)
		}
		defer func() { _ = fh.Close() }()
		cfg.LoadedProfile = fh
	}
	if f.cpuProfile != "" {
		fh, err := os.Create(f.cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer func() { _ = fh.Close() }()
		if err := pprof.StartCPUProfile(fh); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	rep, runErr := bench.Run(ctx, target, cfg)
	if rep != nil {
		write := rep.WriteTable
		if f.output == "json" {
			write = rep.WriteJSON
		}
		if err := write(env.Out); err != nil {
			return err
		}
		if f.jsonPath != "" {
			if err := writeFileWith(f.jsonPath, rep.WriteJSON); err != nil {
				return fmt.Errorf("--json: %w", err)
			}
		}
		if f.svgDir != "" {
			if err := os.MkdirAll(f.svgDir, 0o755); err != nil {
				return fmt.Errorf("--svg: %w", err)
			}
			for _, s := range rep.Series {
				if err := os.WriteFile(filepath.Join(f.svgDir, s.Name+".svg"), bench.Plot(s), 0o644); err != nil {
					return fmt.Errorf("--svg: %w", err)
				}
			}
		}
	}
	return runErr
}

func writeFileWith(path string, fn func(io.Writer) error) error {
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fn(fh); err != nil {
		_ = fh.Close()
		return err
	}
	return fh.Close()
}

func isTerminal(w io.Writer) bool {
	fh, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := fh.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// devTarget starts an in-process dev stack in dir for the bench.
func devTarget(ctx context.Context, dir, storeURL string, workers, slots int) (*bench.Target, func(), error) {
	stmts := bench.NewStatementCounter()
	ctx = pgstore.WithQueryTracer(ctx, stmts)
	d, err := app.StartDev(ctx, app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", StoreURL: storeURL, Workers: workers, Slots: slots, Getenv: os.Getenv, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, nil, fmt.Errorf("dev stack: %w", err)
	}
	cl, err := client.New(d.URL, "")
	if err != nil {
		d.Close()
		return nil, nil, err
	}
	url := storeURL
	if url == "" {
		url = "sqlite:" + filepath.Join(dir, "rath.db")
	}
	kind := "sqlite"
	if strings.HasPrefix(url, "postgres") {
		kind = "postgres"
	}
	t := &bench.Target{
		Name:   fmt.Sprintf("in-process dev stack (%s store, embedded NATS, %d workers × %d slots)", kind, workers, slots),
		Client: cl, NC: d.Backend.NC, StoreURL: url, Memory: d.Backend.Memory, InProcess: true,
		Statements: stmts,
	}
	if sq, ok := d.Backend.Store.(*sqlitestore.Store); ok {
		t.GroupCommits = sq.GroupCommits
	}
	return t, d.Close, nil
}

// oneClock reports whether a cluster's processes read this machine's
// clock, so that its workers' event stamps and the bench's times compare:
// its coordinator is on a loopback address and every --process names a
// pid here (make bench-cluster). A loopback address alone is not enough:
// a port forwarded to a remote cluster is one too.
func oneClock(server string, procs []bench.Process) bool {
	u, err := url.Parse(server)
	if err != nil || len(procs) == 0 {
		return false
	}
	host := u.Hostname()
	ip := net.ParseIP(host)
	loopback := host == "localhost" || ip != nil && ip.IsLoopback()
	if !loopback {
		return false
	}
	for _, p := range procs {
		if !strings.HasPrefix(p.Source, "pid:") {
			return false
		}
	}
	return true
}

// remoteTarget is a running cluster; --store and --nats add its limits.
func remoteTarget(ctx context.Context, f *benchFlags) (*bench.Target, func(), error) {
	server := apiServer(f.server)
	cl, err := client.New(server, apiToken(f.token, server))
	if err != nil {
		return nil, nil, err
	}
	t := &bench.Target{Name: server, Client: cl, StoreURL: f.store}
	for _, v := range f.processes {
		p, err := bench.ParseProcess(v, nil)
		if err != nil {
			return nil, nil, &exitError{code: 2, err: fmt.Errorf("--process %w", err)}
		}
		t.Processes = append(t.Processes, p)
	}
	t.OneClock = oneClock(server, t.Processes)
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	if f.natsURL != "" {
		nc, err := nats.Connect(f.natsURL, nats.Name("rathctl-bench"))
		if err != nil {
			return nil, nil, fmt.Errorf("--nats: %w", err)
		}
		closers = append(closers, nc.Close)
		t.NC = nc
	}
	if f.store != "" {
		var ms memory.Store
		if p := app.MemoryPath(f.store); p != "" {
			ms, err = sqlitemem.Open(ctx, p)
		} else {
			ms, err = pgmem.Open(ctx, f.store)
		}
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("--store: memory store: %w", err)
		}
		closers = append(closers, func() { _ = ms.Close() })
		t.Memory = ms
	}
	return t, closeAll, nil
}
