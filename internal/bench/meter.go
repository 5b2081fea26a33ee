package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rath-run/rath/internal/cpustat"
)

// meter measures a phase's cost per step: CPU by process (this process;
// a remote target's processes that Target.Processes names; the Postgres
// backends serving the store and the server's background processes, when
// the server is on this machine) and Postgres statements and round trips.
type meter struct {
	t           *Target
	db          dbProbe
	db0         dbSample
	dbErr       error
	self0       time.Duration
	selfOK      bool
	procs0      []procSample
	stmts0, rt0 int64
	tx0, gc0    int64
	coll0       cpustat.Collector
	collOK      bool
	// load is the load generator's share of the in-process stack's CPU
	// in the phase (loadShare), or loadErr why it is not known.
	load    float64
	loadErr error
}

func (b *runner) startMeter(ctx context.Context) *meter {
	m := &meter{t: b.t, db: dbProbe{url: b.t.StoreURL}, loadErr: errNoLoadedProfile}
	if m.db.postgres() {
		m.db0, m.dbErr = m.db.read(ctx)
	}
	if b.t.Statements != nil {
		m.stmts0, m.rt0 = b.t.Statements.Counts()
	}
	if b.t.GroupCommits != nil {
		m.tx0, m.gc0 = b.t.GroupCommits()
	}
	m.procs0 = readProcesses(ctx, b.t.Processes)
	m.coll0, m.collOK = cpustat.Collected()
	m.self0, m.selfOK = cpustat.Self()
	return m
}

// procSample is one reading of a Target.Processes entry.
type procSample struct {
	cpu time.Duration
	err error
}

func readProcesses(ctx context.Context, ps []Process) []procSample {
	out := make([]procSample, len(ps))
	for i, p := range ps {
		out[i].cpu, out[i].err = p.Read(ctx)
	}
	return out
}

// report adds the phase's per-step figures for n steps to r.
func (m *meter) report(ctx context.Context, r *Report, n int) {
	if n == 0 {
		return
	}
	self1, selfOK := cpustat.Self()
	perStep := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(n) }
	var total, loadUS float64
	loadKnown := false // loadUS is the load generator's part (0 is a reading)
	row := func(name string, d time.Duration, inTotal bool) {
		v := perStep(d)
		if inTotal {
			total += v
		}
		r.CPU = append(r.CPU, ProcessCPU{Process: name, PerStepUS: v, InTotal: inTotal})
	}
	na := func(name, why string) { r.CPU = append(r.CPU, ProcessCPU{Process: name, NA: why}) }
	complete := true
	switch {
	case !m.selfOK || !selfOK:
		na("rathctl bench (this process)", "n/a (getrusage)")
		complete = false
	case m.t.InProcess:
		// The whole in-process stack: coordinator, workers, embedded NATS
		// and the load generator.
		row("rath: this process (API, workers, embedded NATS, load generator)", self1-m.self0, true)
		switch {
		case m.loadErr == nil:
			load := time.Duration(m.load * float64(self1-m.self0))
			row(fmt.Sprintf("  of which the load generator (%.1f%% of the phase's CPU profile: the bench, its API client and HTTP transport)", m.load*100), load, false)
			loadUS, loadKnown = perStep(load), true
		case !errors.Is(m.loadErr, errNoLoadedProfile):
			r.note("steps: the load generator's CPU not told from the stack's (%v)", m.loadErr)
		}
		if coll1, ok := cpustat.Collected(); ok && m.collOK {
			// A short phase may see no collection: the count goes in the
			// row's name, where zero is a reading, not a missing figure.
			row(fmt.Sprintf("  of which Go's garbage collector (the runtime's estimate; GOGC=%d, %.2f collections per 1,000 steps)",
				coll1.Percent, float64(coll1.Cycles-m.coll0.Cycles)*1000/float64(n)), coll1.CPU-m.coll0.CPU, false)
		}
	case len(m.t.Processes) == 0:
		row("rathctl bench (load generator only)", self1-m.self0, false)
		na("rath coordinator, workers, NATS", "n/a (remote; --process names them)")
		complete = false
	default:
		row("rathctl bench (load generator only)", self1-m.self0, false)
		// The processes --process named, as many as the user listed: the
		// total is theirs and Postgres'.
		for i, s1 := range readProcesses(ctx, m.t.Processes) {
			p, s0 := m.t.Processes[i], m.procs0[i]
			name := fmt.Sprintf("%s (%s)", p.Name, p.Source)
			if err := firstErr(s0.err, s1.err); err != nil {
				na(name, fmt.Sprintf("n/a (%v)", err))
				complete = false
				continue
			}
			row(name, s1.cpu-s0.cpu, true)
		}
		r.note("steps: the CPU per step total counts the processes --process named and the Postgres backends; name every Rath process (coordinator, workers, NATS) for the whole figure")
	}
	if m.db.postgres() {
		db1, err := m.db.read(ctx)
		switch {
		case m.dbErr != nil || err != nil:
			na("postgres backends", fmt.Sprintf("n/a (%v)", firstErr(m.dbErr, err)))
			complete = false
		case !m.db0.local || !db1.local:
			na("postgres backends", "n/a (remote)")
			complete = false
		default:
			row(fmt.Sprintf("postgres: backends of the store's database (%d)", len(db1.backends)), cpuDelta(m.db0.backends, db1.backends), true)
			row("postgres: background processes (WAL writer, checkpointer…; shared with other databases)", cpuDelta(m.db0.background, db1.background), false)
		}
		if err == nil && m.dbErr == nil && m.db0.walOK && db1.walOK && db1.wal > m.db0.wal {
			// The server's, not the database's alone: in a bench nothing else
			// writes, and it counts what a step's rows and indexes cost the
			// disk, whatever the machine's noise.
			r.add(Figure{Scenario: "steps", Name: "Postgres WAL per step, loaded (the server's: every database's)", Value: float64(db1.wal-m.db0.wal) / float64(n), Unit: "bytes"})
		} else {
			r.note("steps: WAL per step not measured (the server's WAL position could not be read)")
		}
		switch {
		case m.t.Statements != nil:
			s1, rt1 := m.t.Statements.Counts()
			r.add(Figure{Scenario: "steps", Name: "Postgres statements per step, loaded (pgx tracer; BEGIN/COMMIT included)", Value: float64(s1-m.stmts0) / float64(n), Unit: "statements"})
			r.add(Figure{Scenario: "steps", Name: "Postgres round trips per step, loaded (pgx tracer)", Value: float64(rt1-m.rt0) / float64(n), Unit: "round trips"})
		case err == nil && m.dbErr == nil && m.db0.callsOK && db1.callsOK:
			r.add(Figure{Scenario: "steps", Name: "Postgres statements per step, loaded (pg_stat_statements)", Value: float64(db1.calls-m.db0.calls) / float64(n), Unit: "statements"})
		default:
			r.note("steps: statements per step not measured (no in-process tracer and no pg_stat_statements)")
		}
	}
	if m.t.GroupCommits != nil {
		tx1, gc1 := m.t.GroupCommits()
		r.add(Figure{Scenario: "steps", Name: "SQLite write transactions per step, loaded", Value: float64(tx1-m.tx0) / float64(n), Unit: "transactions"})
		r.add(Figure{Scenario: "steps", Name: "SQLite commits per step, loaded (group commit)", Value: float64(gc1-m.gc0) / float64(n), Unit: "commits"})
	}
	if complete {
		r.CPU = append(r.CPU, ProcessCPU{Process: "total (rows above marked in the total)", PerStepUS: total})
		name := "CPU per step, loaded, Rath (one process: the store is SQLite in it)"
		switch {
		case !m.t.InProcess && m.db.postgres():
			name = "CPU per step, loaded, the processes named + Postgres backends"
		case !m.t.InProcess:
			name = "CPU per step, loaded, the processes named"
		case m.db.postgres():
			name = "CPU per step, loaded, Rath + Postgres backends"
		}
		r.add(Figure{Scenario: "steps", Name: name, Value: total, Unit: "µs"})
		if loadKnown {
			r.add(Figure{Scenario: "steps", Name: name + ", the load generator's part taken out", Value: total - loadUS, Unit: "µs"})
		}
	}
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
