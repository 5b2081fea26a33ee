// Package bench is Rath's load generator: named scenarios run against a
// coordinator (a remote cluster or an in-process dev stack), each figure
// measured next to the machine limit it is bounded by (the store's
// single-row commit rate, JetStream's publish+ack rate, a bare `docker
// exec`) or, where there is no machine limit, the docs/architecture.md §10 budget, and
// reported as a ratio to it. It also records growth series (cost against
// work) and renders them as SVG with [Plot].
//
// Scenarios: steps, fork, lineage, recall, sandbox, fanout (see
// [Scenarios]). A scenario that needs what the target lacks (memory
// without a store, sandbox without Docker outside CI) is skipped with a
// note in the report, never silently.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/memory"
)

// Scenarios are the scenario names, in the order they run.
var Scenarios = []string{"steps", "fork", "lineage", "recall", "sandbox", "fanout"}

// ParseScenarios parses a comma-separated list of scenario names; "all"
// names every scenario. The result is in run order, without duplicates.
func ParseScenarios(s string) ([]string, error) {
	want := map[string]bool{}
	for name := range strings.SplitSeq(s, ",") {
		name = strings.TrimSpace(name)
		switch {
		case name == "all":
			for _, n := range Scenarios {
				want[n] = true
			}
		case slices.Contains(Scenarios, name):
			want[name] = true
		default:
			return nil, fmt.Errorf("scenario %q: unknown (want one of %s, or all)", name, strings.Join(Scenarios, ", "))
		}
	}
	var out []string
	for _, n := range Scenarios {
		if want[n] {
			out = append(out, n)
		}
	}
	return out, nil
}

// Target is what the scenarios run against.
type Target struct {
	// Name describes the target in the report ("dev stack, sqlite", a URL).
	Name   string
	Client *client.Client
	// NC, when set, is a connection to the cluster's NATS: steps are timed
	// by their step.committed events on it, and JetStream's limit is
	// measured on it. Without it steps are timed through the API's event
	// stream and the JetStream limit is not measured.
	NC *nats.Conn
	// InProcess: the whole stack runs in this process (a dev stack), so
	// the process's CPU time is the stack's, reported per step.
	InProcess bool
	// OneClock: a remote stack's processes read this machine's clock, so
	// the steps scenario splits each step's latency by the worker's event
	// stamps (with NC), as it does for an InProcess one.
	OneClock bool
	// StoreURL, when set, is the Session Graph store: the commit-rate limit
	// is measured on its database and storage growth is read from it.
	StoreURL string
	// Statements, when set, counts the statements the target's own Postgres
	// connections make (installed with pgstore.WithQueryTracer on an
	// in-process stack); without it statements per step come from
	// pg_stat_statements when the server has it loaded.
	Statements *StatementCounter
	// GroupCommits, when set, reports the SQLite store's write
	// transactions and the group commits that carried them
	// (sqlitestore.Store.GroupCommits).
	GroupCommits func() (transactions, commits int64)
	// Memory, when set, is the memory store the recall scenario loads.
	Memory memory.Store
	// Processes are a remote target's processes (coordinator, workers,
	// NATS) whose CPU time the steps scenario reports per step, with
	// the Postgres backends, in its total.
	Processes []Process
	// StartStack, when set, starts another stack like this one with the
	// given number of worker processes (steps/s vs workers).
	StartStack func(ctx context.Context, workers int) (*Target, func(), error)
}

// Config configures a run.
type Config struct {
	Scenarios []string
	// Duration is each scenario's measuring time (its main phase).
	Duration time.Duration
	// Concurrency is the number of submissions in flight in loaded phases.
	Concurrency int
	// ModelLatency is the scripted model's simulated latency per reply.
	ModelLatency time.Duration
	// ModelJitter spreads that latency: each reply waits a duration drawn
	// uniformly from ModelLatency ± ModelJitter (at most ModelLatency).
	ModelJitter time.Duration
	// ToolRounds makes the bench agent a tool agent: each step calls
	// write_workspace_file in this many rounds before it answers (each
	// round journaled, its workspace checkpointed). 0: one model reply.
	ToolRounds int
	// ForkLengths are the session lengths (chunks) fork and load costs are
	// measured at.
	ForkLengths []int
	// Appends is the number of appends the storage-growth series makes.
	Appends int
	// Depth is the length of the chain the lineage scenario walks.
	Depth int
	// RecallSizes are the item counts recall is measured at.
	RecallSizes []int
	// Fanout is the number of branches per fan-out round.
	Fanout int
	// WorkerSweep are the worker counts steps/s is measured at (needs
	// Target.StartStack).
	WorkerSweep []int
	// Dir is a scratch directory.
	Dir string
	// Progress receives progress lines; TTY rewrites one line in place.
	Progress io.Writer
	TTY      bool
	// Getenv reads RATH_TEST_PG_BIN (pgbench) and CI.
	Getenv func(string) string
	// LoadedProfile, when set, receives a CPU profile of the steps
	// scenario's loaded phase alone: the phase its CPU-per-step figures
	// measure, without the limits, the serial phase or the other
	// scenarios. It must not be set while another CPU profile runs in
	// this process.
	LoadedProfile io.Writer
}

func (c *Config) defaults() {
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 16
	}
	if len(c.ForkLengths) == 0 {
		c.ForkLengths = []int{10, 1000, 10000, 50000}
	}
	if c.Appends <= 0 {
		c.Appends = 500
	}
	if c.Depth <= 0 {
		c.Depth = 1000
	}
	if len(c.RecallSizes) == 0 {
		c.RecallSizes = []int{1000, 10000, 100000}
	}
	if c.Fanout <= 0 {
		c.Fanout = 8
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.Getenv == nil {
		c.Getenv = func(string) string { return "" }
	}
}

// errSkip marks a scenario skipped for a stated reason.
var errSkip = errors.New("skipped")

// Run measures the limits, then runs the configured scenarios against t.
// A scenario's failure ends the run with its error; the report so far is
// returned with it.
func Run(ctx context.Context, t *Target, cfg Config) (*Report, error) {
	cfg.defaults()
	if t == nil || t.Client == nil {
		return nil, errors.New("bench: target has no client")
	}
	r := &Report{Started: time.Now().UTC(), Target: t.Name, Machine: thisMachine(), Scenarios: cfg.Scenarios}
	p := &progress{w: cfg.Progress, tty: cfg.TTY}
	defer func() { r.Elapsed = time.Since(r.Started).Seconds() }()
	if err := measureLimits(ctx, r, t, cfg, p); err != nil {
		return r, err
	}
	b := &runner{t: t, cfg: cfg, r: r, p: p}
	for _, name := range cfg.Scenarios {
		fn := map[string]func(context.Context) error{
			"steps": b.steps, "fork": b.fork, "lineage": b.lineage,
			"recall": b.recall, "sandbox": b.sandbox, "fanout": b.fanout,
		}[name]
		if fn == nil {
			return r, fmt.Errorf("scenario %q: unknown", name)
		}
		p.start(name)
		err := fn(ctx)
		p.done()
		if errors.Is(err, errSkip) {
			r.note("%s: %v", name, err)
			continue
		}
		if err != nil {
			return r, fmt.Errorf("scenario %s: %w", name, err)
		}
	}
	return r, nil
}

func measureLimits(ctx context.Context, r *Report, t *Target, cfg Config, p *progress) error {
	d := max(time.Second, cfg.Duration/4)
	p.start("limits")
	defer p.done()
	if t.StoreURL != "" {
		p.set("commit loop")
		rate, how, err := commitRate(ctx, t.StoreURL, cfg.Dir, d)
		if err != nil {
			return err
		}
		r.Limits = append(r.Limits, Limit{Name: LimitCommit, Value: rate, Unit: "commits/s", How: how})
		if isPostgres(t.StoreURL) {
			pgb, err := findPgbench(cfg.Getenv)
			if err != nil {
				r.note("limits: %v; the in-process commit loop stands in", err)
			} else {
				for _, c := range []struct {
					name    string
					clients int
				}{{LimitPgbench, 1}, {LimitPgbench16, 16}} {
					p.set("pgbench, %d clients", c.clients)
					tps, err := pgbenchRate(ctx, pgb, t.StoreURL, cfg.Dir, c.clients, d)
					if err != nil {
						return err
					}
					r.Limits = append(r.Limits, Limit{Name: c.name, Value: tps, Unit: "commits/s", How: fmt.Sprintf("pgbench -n -c %d, one-row INSERT per transaction, same database", c.clients)})
				}
			}
		}
	} else {
		r.note("limits: no --store, so the commit-rate limit is not measured")
	}
	if t.NC != nil {
		p.set("jetstream")
		rate, err := jetStreamRate(ctx, t.NC, d)
		if err != nil {
			return err
		}
		r.Limits = append(r.Limits, Limit{Name: LimitJetStream, Value: rate, Unit: "msgs/s", How: "publish of 256 B to a scratch file stream, one at a time, each waiting for its PubAck"})
	} else {
		r.note("limits: no --nats, so the JetStream limit is not measured")
	}
	return nil
}

// progress writes one status line: rewritten in place on a TTY, plain
// lines (at most one per second) otherwise.
type progress struct {
	w     io.Writer
	tty   bool
	name  string
	t0    time.Time
	last  time.Time
	dirty bool
}

func (p *progress) start(name string) {
	p.name, p.t0 = name, time.Now()
	p.set("starting")
}

func (p *progress) set(format string, args ...any) {
	now := time.Now()
	if !p.tty && now.Sub(p.last) < time.Second && format != "starting" {
		return
	}
	p.last = now
	msg := fmt.Sprintf("bench %-8s %5.1fs  %s", p.name, now.Sub(p.t0).Seconds(), fmt.Sprintf(format, args...))
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", msg)
		p.dirty = true
		return
	}
	fmt.Fprintln(p.w, msg)
}

func (p *progress) done() {
	if p.tty && p.dirty {
		fmt.Fprintf(p.w, "\r\033[Kbench %-8s done in %.1fs\n", p.name, time.Since(p.t0).Seconds())
		p.dirty = false
		return
	}
	if !p.tty {
		fmt.Fprintf(p.w, "bench %-8s done in %.1fs\n", p.name, time.Since(p.t0).Seconds())
	}
}
