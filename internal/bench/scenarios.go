package bench

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/memory"
	"github.com/rath-run/rath/pkg/memory/memcorpus"
	"github.com/rath-run/rath/pkg/sandbox"
	"github.com/rath-run/rath/pkg/sandbox/docker"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/pgstore"
)

type runner struct {
	t   *Target
	cfg Config
	r   *Report
	p   *progress
}

func (b *runner) spec() json.RawMessage {
	delay := func(reply map[string]any) map[string]any {
		if b.cfg.ModelLatency > 0 {
			reply["delay_ms"] = b.cfg.ModelLatency.Milliseconds()
		}
		if b.cfg.ModelJitter > 0 {
			reply["delay_jitter_ms"] = b.cfg.ModelJitter.Milliseconds()
		}
		return reply
	}
	// With ToolRounds, rounds 1..n each write bench.txt (a new content
	// each round: the workspace changes, so each round's checkpoint
	// snapshots it) before the answer.
	var script []any
	for i := 1; i <= b.cfg.ToolRounds; i++ {
		args, _ := json.Marshal(map[string]string{"path": "bench.txt", "content": fmt.Sprintf("round %d\n", i)})
		script = append(script, delay(map[string]any{"tool_calls": []any{map[string]any{
			"id": fmt.Sprintf("w%d", i), "type": "function",
			"function": map[string]any{"name": "write_workspace_file", "arguments": string(args)},
		}}}))
	}
	script = append(script, delay(map[string]any{"content": "ok"}))
	spec := map[string]any{"name": "bench", "model": "scripted", "script": script}
	if b.cfg.ToolRounds > 0 {
		spec["tools"] = []string{"write_workspace_file"}
	}
	out, _ := json.Marshal(spec)
	return out
}

// committer waits for steps' commits: through step.committed events on
// NATS when the target has a connection, else through the run's event
// stream.
type committer struct {
	cl   *client.Client
	subs []*nats.Subscription
	mu   sync.Mutex
	got  map[string]chan commitResult
	// started holds each run's step.started stamp until its commit.
	started map[string]time.Time
}

// commitResult is a step's commit as the committer saw it; started and
// committed are the worker's stamps on the step's step.started and
// step.committed events (zero when not seen, or without NATS).
type commitResult struct {
	version            string
	err                error
	started, committed time.Time
}

// phases splits one submit→commit latency in three: from the submit to
// the step's start, from the start to the commit (the model's time
// included), and from the commit to its event's arrival here; request is
// the submit request's round trip, a part of the first (the step may
// start before the answer arrives). See runner.reportPhases.
type phases struct {
	request, toStart, toCommit, toSeen time.Duration
}

func newCommitter(t *Target) (*committer, error) {
	c := &committer{cl: t.Client, got: map[string]chan commitResult{}, started: map[string]time.Time{}}
	if t.NC == nil {
		return c, nil
	}
	handle := func(m *nats.Msg) {
		// A step that ends within its worker's linger sends its events
		// and its run's end as one message, on the run end's subject.
		es, err := bus.DecodeEvents(m.Subject, m.Data)
		if err != nil {
			return
		}
		for _, e := range es {
			c.note(e)
		}
	}
	for _, subj := range []string{"step.committed", "step.started", "run.completed", "run.failed"} {
		sub, err := t.NC.Subscribe(bus.EventSubject("*", subj), handle)
		if err != nil {
			c.close()
			return nil, fmt.Errorf("subscribe to %s: %w", subj, err)
		}
		c.subs = append(c.subs, sub)
	}
	if err := t.NC.Flush(); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// note records what e says of its run's first step: its start, or its
// end (the commit, or the run's failure).
func (c *committer) note(e bus.Event) {
	var data struct {
		Version string `json:"version"`
		Error   string `json:"error"`
	}
	switch e.Type {
	case "step.started":
		// A one-step run's start; its commit comes after it on the
		// same connection.
		c.mu.Lock()
		c.started[e.RunID] = e.Time
		c.mu.Unlock()
		return
	case "step.committed", "run.failed":
	default:
		return
	}
	_ = json.Unmarshal(e.Data, &data)
	c.mu.Lock()
	started := c.started[e.RunID]
	delete(c.started, e.RunID)
	c.mu.Unlock()
	res := commitResult{version: data.Version, started: started, committed: e.Time}
	if e.Type != "step.committed" {
		res.err = fmt.Errorf("run %s: %s: %s", e.RunID, e.Type, data.Error)
	}
	select {
	case c.ch(e.RunID) <- res:
	default:
	}
}

func (c *committer) close() {
	for _, s := range c.subs {
		_ = s.Unsubscribe()
	}
}

func (c *committer) ch(run string) chan commitResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch, ok := c.got[run]
	if !ok {
		ch = make(chan commitResult, 1)
		c.got[run] = ch
	}
	return ch
}

// wait returns the version the run's first step committed, and with NATS
// the worker's stamps on its start and commit.
func (c *committer) wait(ctx context.Context, run string) (commitResult, error) {
	if len(c.subs) > 0 {
		ch := c.ch(run)
		defer func() { c.mu.Lock(); delete(c.got, run); delete(c.started, run); c.mu.Unlock() }()
		select {
		case res := <-ch:
			return res, res.err
		case <-time.After(time.Minute):
			return commitResult{}, fmt.Errorf("run %s: no step.committed within a minute", run)
		case <-ctx.Done():
			return commitResult{}, ctx.Err()
		}
	}
	v, err := c.watch(ctx, run)
	return commitResult{version: v}, err
}

// stepWait is how long one of watch's long polls waits for the step.
const stepWait = 30 * time.Second

// watch waits for the end of the run's first step (key "0", its ordinal)
// with long polls of GET /v1/runs/{id}/steps/0?wait=, one request at a
// time. Not through the run's event stream: the coordinator lets a token
// hold 8 of those at once and a tenant 100 (docs/api.md), fewer than the
// runs the bench keeps in flight, and each holds a JetStream consumer.
func (c *committer) watch(ctx context.Context, run string) (string, error) {
	for {
		st, err := c.cl.GetStep(ctx, run, "0", stepWait)
		if err != nil {
			return "", fmt.Errorf("run %s: %w", run, err)
		}
		switch {
		case st.Status == api.StepCommitted && st.Output != nil:
			return st.Output.String(), nil
		case st.Terminal():
			return "", fmt.Errorf("run %s: step %s ended %s: %s", run, st.ID, st.Status, st.Error)
		}
	}
}

// submit posts a run of the bench agent (on a new session with one user
// message, or on session when set) and waits for its step's commit.
func (b *runner) submit(ctx context.Context, c *committer, sessionID string) (string, time.Duration, error) {
	v, l, _, err := b.submitPhases(ctx, c, sessionID)
	return v, l, err
}

// submitPhases is submit, also splitting the latency (phases; zero
// phases when the commit's events were not seen on NATS).
func (b *runner) submitPhases(ctx context.Context, c *committer, sessionID string) (string, time.Duration, phases, error) {
	req := api.SubmitRequest{Agent: b.spec(), Session: sessionID}
	if sessionID == "" {
		req.Message = "go"
	}
	t0 := time.Now()
	run, err := b.t.Client.SubmitAgent(ctx, req)
	if err != nil {
		return "", 0, phases{}, fmt.Errorf("submit: %w", err)
	}
	t1 := time.Now()
	res, err := c.wait(ctx, run.ID)
	seen := time.Now()
	var ph phases
	if !res.started.IsZero() && !res.committed.IsZero() {
		ph = phases{request: t1.Sub(t0), toStart: res.started.Sub(t0), toCommit: res.committed.Sub(res.started), toSeen: seen.Sub(res.committed)}
	}
	return res.version, seen.Sub(t0), ph, err
}

// drive runs op from n goroutines until d has passed and returns the
// latencies and the elapsed time.
func drive(ctx context.Context, n int, d time.Duration, p *progress, what string, op func(context.Context) (time.Duration, error)) ([]time.Duration, time.Duration, error) {
	var (
		mu    sync.Mutex
		lat   []time.Duration
		first error
		wg    sync.WaitGroup
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t0 := time.Now()
	deadline := t0.Add(d)
	for range n {
		wg.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil {
				l, err := op(ctx)
				mu.Lock()
				if err != nil {
					if first == nil {
						first = err
					}
					mu.Unlock()
					cancel()
					return
				}
				lat = append(lat, l)
				count := len(lat)
				p.set("%s: %d done, %.0f/s", what, count, float64(count)/time.Since(t0).Seconds())
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return lat, time.Since(t0), first
}

func (b *runner) steps(ctx context.Context) error {
	c, err := newCommitter(b.t)
	if err != nil {
		return err
	}
	defer c.close()
	// In the serial and the loaded phase, when the stack reads this
	// machine's clock (Target.InProcess or OneClock: the worker's event
	// stamps and the client's times compare), op also keeps each
	// latency's split;
	// splitting is set before the serial phase's goroutine starts.
	//
	// The loaded phase also notes when each step's commit was seen, for
	// its steady rate: the steps seen in the phase's second half, when
	// every session has been in flight for a while and none has stopped
	// yet. The phase's rate counts from the start, when all sessions
	// submit at once, to the end of the last step, when fewer and fewer
	// are left in flight: with a 500 ms model and a 10 s phase both ends
	// weigh. noting is set before the loaded phase's goroutines start.
	var (
		phaseMu     sync.Mutex
		serialSplit []phases
		split       []phases
		splitting   bool
		seen        []time.Time
		noting      bool
	)
	op := func(ctx context.Context) (time.Duration, error) {
		_, l, ph, err := b.submitPhases(ctx, c, "")
		if err != nil || (!noting && !splitting) {
			return l, err
		}
		phaseMu.Lock()
		if noting {
			seen = append(seen, time.Now())
		}
		if splitting && ph != (phases{}) {
			if noting {
				split = append(split, ph)
			} else {
				serialSplit = append(serialSplit, ph)
			}
		}
		phaseMu.Unlock()
		return l, err
	}
	for range 5 { // warm up connections and the consumer
		if _, err := op(ctx); err != nil {
			return err
		}
	}
	splitting = (b.t.InProcess || b.t.OneClock) && b.t.NC != nil
	instant := b.cfg.ModelLatency == 0
	serial, _, err := drive(ctx, 1, b.cfg.Duration/3, b.p, "serial", op)
	if err != nil {
		return err
	}
	budget := func(v float64) float64 {
		if instant {
			return v
		}
		return 0
	}
	limit := func(v float64) string {
		if v > 0 {
			return LimitBudget
		}
		return ""
	}
	for _, q := range []struct {
		name   string
		p      float64
		budget float64
	}{{"serial submit→commit p50", 0.50, budget(3)}, {"serial submit→commit p95", 0.95, 0}, {"serial submit→commit p99", 0.99, budget(15)}} {
		b.r.add(Figure{Scenario: "steps", Name: q.name, Value: quantile(serial, q.p), Unit: "ms", Limit: limit(q.budget), LimitValue: q.budget})
	}
	b.reportPhases("serial", serialSplit)
	// A profile of the loaded phase also tells, in-process, the load
	// generator's CPU from the stack's (loadShare). It is not taken
	// unasked: the profiler's signals cost a CPU-bound loop 11–20% of its
	// CPU on a 2-vCPU KVM guest (docs/BENCHMARKS.md), which every figure
	// of the phase would carry.
	var prof bytes.Buffer
	if b.cfg.LoadedProfile != nil {
		if err := pprof.StartCPUProfile(io.MultiWriter(b.cfg.LoadedProfile, &prof)); err != nil {
			return fmt.Errorf("profile of the loaded phase: %w", err)
		}
	}
	noting = true
	m := b.startMeter(ctx)
	phase := b.cfg.Duration * 2 / 3
	start := time.Now()
	loaded, el, err := drive(ctx, b.cfg.Concurrency, phase, b.p, "loaded", op)
	if b.cfg.LoadedProfile != nil {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return err
	}
	if b.cfg.LoadedProfile != nil {
		m.load, m.loadErr = loadShare(prof.Bytes())
	}
	rate := float64(len(loaded)) / el.Seconds()
	m.report(ctx, b.r, len(loaded))
	b.r.add(Figure{Scenario: "steps", Name: fmt.Sprintf("steps/s, %d in flight", b.cfg.Concurrency), Value: rate, Unit: "steps/s", Limit: LimitCommit, HigherIsBetter: true})
	if _, ok := b.r.limit(LimitPgbench); ok {
		b.r.add(Figure{Scenario: "steps", Name: fmt.Sprintf("steps/s, %d in flight", b.cfg.Concurrency), Value: rate, Unit: "steps/s", Limit: LimitPgbench, HigherIsBetter: true})
	}
	if _, ok := b.r.limit(LimitPgbench16); ok {
		b.r.add(Figure{Scenario: "steps", Name: fmt.Sprintf("steps/s, %d in flight", b.cfg.Concurrency), Value: rate, Unit: "steps/s", Limit: LimitPgbench16, HigherIsBetter: true})
	}
	if _, ok := b.r.limit(LimitJetStream); ok {
		b.r.add(Figure{Scenario: "steps", Name: fmt.Sprintf("steps/s, %d in flight", b.cfg.Concurrency), Value: rate, Unit: "steps/s", Limit: LimitJetStream, HigherIsBetter: true})
	}
	phaseMu.Lock()
	steady := steadyRate(seen, start.Add(phase/2), start.Add(phase))
	phaseMu.Unlock()
	if steady > 0 {
		b.r.add(Figure{Scenario: "steps", Name: fmt.Sprintf("steps/s, %d in flight, the phase's second half", b.cfg.Concurrency), Value: steady, Unit: "steps/s", HigherIsBetter: true})
	} else {
		// No commit in the window is no rate: the phase was shorter than
		// a step.
		b.r.note("steps: no step committed in the loaded phase's second half (%v): its steady rate is not measured; run a longer --duration", phase/2)
	}
	b.r.add(Figure{Scenario: "steps", Name: "loaded submit→commit p50", Value: quantile(loaded, 0.5), Unit: "ms"})
	b.r.add(Figure{Scenario: "steps", Name: "loaded submit→commit p99", Value: quantile(loaded, 0.99), Unit: "ms"})
	b.reportPhases("loaded", split)
	if b.t.StartStack == nil || len(b.cfg.WorkerSweep) == 0 {
		return nil
	}
	s := Series{Name: "steps_vs_workers", Title: "Step throughput vs worker processes", XLabel: "workers (in-process, each with --slots slots)", YLabel: "steps/s"}
	for _, w := range b.cfg.WorkerSweep {
		b.p.set("starting a stack with %d workers", w)
		t, stop, err := b.t.StartStack(ctx, w)
		if err != nil {
			return fmt.Errorf("stack with %d workers: %w", w, err)
		}
		sub := &runner{t: t, cfg: b.cfg, r: b.r, p: b.p}
		c2, err := newCommitter(t)
		if err != nil {
			stop()
			return err
		}
		op2 := func(ctx context.Context) (time.Duration, error) {
			_, l, err := sub.submit(ctx, c2, "")
			return l, err
		}
		lat, el, err := drive(ctx, b.cfg.Concurrency, b.cfg.Duration/2, b.p, fmt.Sprintf("workers=%d", w), op2)
		c2.close()
		stop()
		if err != nil {
			return err
		}
		s.Points = append(s.Points, Point{X: float64(w), Y: float64(len(lat)) / el.Seconds()})
	}
	b.r.Series = append(b.r.Series, s)
	return nil
}

// steadyRate returns how many of the times in seen fall in [from, to), a
// second.
func steadyRate(seen []time.Time, from, to time.Time) float64 {
	n := 0
	for _, t := range seen {
		if !t.Before(from) && t.Before(to) {
			n++
		}
	}
	return float64(n) / to.Sub(from).Seconds()
}

// reportPhases adds where a phase's submit→commit latency went, as
// means: from the submit to the worker's step.started stamp (the submit
// request: the run's commit and the job's publish; then the fetch and the
// step's start), from that stamp to the step.committed stamp (the agent,
// the model's latency included, and the commit), and from that stamp to
// the event's arrival at the client. The three add up to the mean latency
// of the phase's steps whose start was seen; the submit request's round
// trip, a part of the first, is shown as well.
func (b *runner) reportPhases(phase string, split []phases) {
	if len(split) == 0 {
		return
	}
	var sum phases
	for _, ph := range split {
		sum.request += ph.request
		sum.toStart += ph.toStart
		sum.toCommit += ph.toCommit
		sum.toSeen += ph.toSeen
	}
	mean := func(d time.Duration) float64 { return float64(d) / float64(len(split)) / float64(time.Millisecond) }
	for _, f := range []struct {
		name string
		d    time.Duration
	}{
		{"mean: submit → step started", sum.toStart},
		{"mean: of which the submit request (POST /v1/runs)", sum.request},
		{"mean: step started → committed (model included)", sum.toCommit},
		{"mean: committed → step.committed seen", sum.toSeen},
	} {
		b.r.add(Figure{Scenario: "steps", Name: phase + ", " + f.name, Value: mean(f.d), Unit: "ms"})
	}
}

type version struct {
	ID  string `json:"id"`
	Len int    `json:"len"`
}

// newSession creates a session of chunks alternating user and assistant
// turns (starting with the user's), in requests of at most 4,000 chunks
// (the API takes bodies up to 1 MiB), and returns its head.
func (b *runner) newSession(ctx context.Context, chunks int) (string, error) {
	const batch = 4000
	head := ""
	for done := 0; done < chunks; {
		cs := make([]session.Chunk, min(batch, chunks-done))
		for j := range cs {
			i := done + j
			if i%2 == 0 {
				cs[j] = session.User(fmt.Sprintf("message %d: the quick brown fox jumps over the lazy dog", i))
			} else {
				cs[j] = session.Assistant(fmt.Sprintf("reply %d: the lazy dog sleeps on", i))
			}
		}
		path := "/v1/sessions"
		if head != "" {
			path += "/" + head + "/append"
		}
		var v version
		if err := b.t.Client.Do(ctx, "POST", path, map[string]any{"chunks": cs}, &v); err != nil {
			return "", fmt.Errorf("create a %d-chunk session: %w", chunks, err)
		}
		head = v.ID
		done += len(cs)
	}
	return head, nil
}

func (b *runner) post(ctx context.Context, path string, body any) (string, time.Duration, error) {
	t0 := time.Now()
	var v version
	if err := b.t.Client.Do(ctx, "POST", path, body, &v); err != nil {
		return "", 0, fmt.Errorf("POST %s: %w", path, err)
	}
	return v.ID, time.Since(t0), nil
}

func (b *runner) get(ctx context.Context, path string) (time.Duration, error) {
	t0 := time.Now()
	var out json.RawMessage
	if err := b.t.Client.Do(ctx, "GET", path, nil, &out); err != nil {
		return 0, fmt.Errorf("GET %s: %w", path, err)
	}
	return time.Since(t0), nil
}

// median times op k times and returns the median in ms.
func median(ctx context.Context, k int, op func(context.Context) (time.Duration, error)) (float64, error) {
	ds := make([]time.Duration, 0, k)
	for range k {
		d, err := op(ctx)
		if err != nil {
			return 0, err
		}
		ds = append(ds, d)
	}
	return quantile(ds, 0.5), nil
}

func (b *runner) fork(ctx context.Context) error {
	root, err := b.newSession(ctx, 2)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	var forks, appends []time.Duration
	_, el, err := drive(ctx, b.cfg.Concurrency, b.cfg.Duration/2, b.p, "fork+append storm", func(ctx context.Context) (time.Duration, error) {
		id, lf, err := b.post(ctx, "/v1/sessions/"+root+"/fork", nil)
		if err != nil {
			return 0, err
		}
		_, la, err := b.post(ctx, "/v1/sessions/"+id+"/append", map[string]any{"user": "one more"})
		if err != nil {
			return 0, err
		}
		mu.Lock()
		forks, appends = append(forks, lf), append(appends, la)
		mu.Unlock()
		return lf + la, nil
	})
	if err != nil {
		return err
	}
	commits := float64(len(forks)+len(appends)) / el.Seconds()
	b.r.add(Figure{Scenario: "fork", Name: fmt.Sprintf("fork+append commits/s, %d in flight", b.cfg.Concurrency), Value: commits, Unit: "commits/s", Limit: LimitCommit, HigherIsBetter: true})
	b.r.add(Figure{Scenario: "fork", Name: "fork p50 under the storm", Value: quantile(forks, 0.5), Unit: "ms"})
	b.r.add(Figure{Scenario: "fork", Name: "append p50 under the storm", Value: quantile(appends, 0.5), Unit: "ms"})

	// Fork cost against session length: flat by design.
	fs := Series{Name: "fork_vs_length", Title: "Fork cost vs session length (HTTP, median)", XLabel: "session length (chunks)", YLabel: "fork ms"}
	var last float64
	for _, n := range b.cfg.ForkLengths {
		b.p.set("fork of a %d-chunk session", n)
		id, err := b.newSession(ctx, n)
		if err != nil {
			return err
		}
		m, err := median(ctx, 15, func(ctx context.Context) (time.Duration, error) {
			_, d, err := b.post(ctx, "/v1/sessions/"+id+"/fork", nil)
			return d, err
		})
		if err != nil {
			return err
		}
		fs.Points = append(fs.Points, Point{X: float64(n), Y: m})
		last = m
	}
	b.r.Series = append(b.r.Series, fs)
	b.r.add(Figure{Scenario: "fork", Name: fmt.Sprintf("fork of a %d-chunk session, serial, via HTTP", slices.Max(b.cfg.ForkLengths)), Value: last, Unit: "ms", Limit: LimitBudget, LimitValue: 1})

	// Storage bytes against appends: linear by design.
	if b.t.StoreURL == "" {
		b.r.note("fork: no --store, so storage growth is not measured")
		return nil
	}
	size, closeSize, err := storeSizer(ctx, b.t.StoreURL)
	if err != nil {
		return err
	}
	defer closeSize()
	ss := Series{Name: "storage_vs_appends", Title: "Store size vs appends (one 60-byte user chunk each)", XLabel: "appends", YLabel: "store growth (KiB)"}
	base, err := size(ctx)
	if err != nil {
		return err
	}
	ss.Points = append(ss.Points, Point{})
	head := root
	step := max(1, b.cfg.Appends/10)
	for i := 1; i <= b.cfg.Appends; i++ {
		if head, _, err = b.post(ctx, "/v1/sessions/"+head+"/append", map[string]any{"user": fmt.Sprintf("append %06d: the quick brown fox jumps over it", i)}); err != nil {
			return err
		}
		if i%step == 0 {
			b.p.set("storage growth: %d appends", i)
			sz, err := size(ctx)
			if err != nil {
				return err
			}
			ss.Points = append(ss.Points, Point{X: float64(i), Y: float64(sz-base) / 1024})
		}
	}
	b.r.Series = append(b.r.Series, ss)
	if n := len(ss.Points); n > 1 && ss.Points[n-1].X > 0 {
		b.r.add(Figure{Scenario: "fork", Name: "store growth per append", Value: ss.Points[n-1].Y * 1024 / ss.Points[n-1].X, Unit: "bytes"})
	}
	return nil
}

// storeSizer returns a function reading the store's size in bytes: the
// database's size on Postgres, pages in use on SQLite.
func storeSizer(ctx context.Context, url string) (func(context.Context) (int64, error), func(), error) {
	if isPostgres(url) {
		conn, err := pgx.Connect(ctx, pgstore.ConnURL(url))
		if err != nil {
			return nil, nil, fmt.Errorf("store size: %w", err)
		}
		return func(ctx context.Context) (int64, error) {
				var n int64
				err := conn.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&n)
				return n, err
			}, func() {
				_ = conn.Close(context.WithoutCancel(ctx))
			}, nil
	}
	path, ok := strings.CutPrefix(url, "sqlite:")
	if !ok {
		return nil, nil, fmt.Errorf("store size: store URL %q is neither a postgres:// nor a sqlite: URL", url)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=query_only(1)")
	if err != nil {
		return nil, nil, fmt.Errorf("store size: %w", err)
	}
	return func(ctx context.Context) (int64, error) {
		var pages, size int64
		if err := db.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
			return 0, err
		}
		if err := db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&size); err != nil {
			return 0, err
		}
		return pages * size, nil
	}, func() { _ = db.Close() }, nil
}

func (b *runner) lineage(ctx context.Context) error {
	b.p.set("building a %d-deep chain", b.cfg.Depth)
	root, err := b.newSession(ctx, 1)
	if err != nil {
		return err
	}
	head := root
	for i := range b.cfg.Depth {
		if head, _, err = b.post(ctx, "/v1/sessions/"+head+"/append", map[string]any{"user": fmt.Sprintf("turn %d", i)}); err != nil {
			return err
		}
		if i%100 == 0 {
			b.p.set("building a %d-deep chain: %d", b.cfg.Depth, i)
		}
	}
	k := 9
	for _, q := range []struct{ name, path string }{
		{fmt.Sprintf("ancestors at depth %d, via HTTP", b.cfg.Depth), "/v1/sessions/" + head + "/ancestors"},
		{fmt.Sprintf("descendants of a %d-version chain's root, via HTTP", b.cfg.Depth+1), "/v1/sessions/" + root + "/descendants"},
		{fmt.Sprintf("transcript of a %d-step chain, via HTTP", b.cfg.Depth), "/v1/sessions/" + head + "/transcript"},
	} {
		b.p.set("%s", q.name)
		m, err := median(ctx, k, func(ctx context.Context) (time.Duration, error) { return b.get(ctx, q.path) })
		if err != nil {
			return err
		}
		f := Figure{Scenario: "lineage", Name: q.name, Value: m, Unit: "ms"}
		if strings.HasPrefix(q.name, "ancestors") {
			f.Limit, f.LimitValue = LimitBudget, 20
		}
		b.r.add(f)
	}
	ls := Series{Name: "load_vs_length", Title: "Transcript load vs length (HTTP GET, median)", XLabel: "transcript length (chunks)", YLabel: "load ms"}
	for _, n := range b.cfg.ForkLengths {
		b.p.set("load of a %d-chunk transcript", n)
		id, err := b.newSession(ctx, n)
		if err != nil {
			return err
		}
		m, err := median(ctx, k, func(ctx context.Context) (time.Duration, error) { return b.get(ctx, "/v1/sessions/"+id+"/transcript") })
		if err != nil {
			return err
		}
		ls.Points = append(ls.Points, Point{X: float64(n), Y: m})
		if n == 10000 {
			b.r.add(Figure{Scenario: "lineage", Name: "transcript of 10,000 chunks, via HTTP (JSON encode included)", Value: m, Unit: "ms", Limit: LimitBudget, LimitValue: 20})
		}
	}
	b.r.Series = append(b.r.Series, ls)
	return nil
}

func (b *runner) recall(ctx context.Context) error {
	if b.t.Memory == nil {
		return fmt.Errorf("%w: the target has no memory store (use --dev, or --store with --server)", errSkip)
	}
	ns := fmt.Sprintf("rath-bench-%d", time.Now().UnixNano())
	sizes := slices.Sorted(slices.Values(b.cfg.RecallSizes))
	corpus := memcorpus.Corpus(sizes[len(sizes)-1])
	queries := memcorpus.Queries(200)
	rs := Series{Name: "recall_vs_items", Title: "BM25 recall latency vs items (top 8, p50)", XLabel: "items in the namespace", YLabel: "recall p50 ms"}
	loaded := 0
	per := b.cfg.Duration / time.Duration(len(sizes))
	for _, n := range sizes {
		for loaded < n {
			end := min(n, loaded+1000)
			b.p.set("loading items %d..%d", loaded, end)
			if bulk, ok := b.t.Memory.(memcorpus.Bulk); ok {
				if err := bulk.RememberMany(ctx, ns, corpus[loaded:end]); err != nil {
					return fmt.Errorf("load memory: %w", err)
				}
			} else {
				for _, w := range corpus[loaded:end] {
					if _, err := b.t.Memory.Remember(ctx, ns, w); err != nil {
						return fmt.Errorf("load memory: %w", err)
					}
				}
			}
			loaded = end
		}
		i := 0
		lat, _, err := drive(ctx, 1, per, b.p, fmt.Sprintf("recall at %d", n), func(ctx context.Context) (time.Duration, error) {
			q := queries[i%len(queries)]
			i++
			t0 := time.Now()
			if _, err := b.t.Memory.Recall(ctx, ns, memory.Query{Text: q, TopK: 8}); err != nil {
				return 0, fmt.Errorf("recall %q: %w", q, err)
			}
			return time.Since(t0), nil
		})
		if err != nil {
			return err
		}
		p50 := quantile(lat, 0.5)
		rs.Points = append(rs.Points, Point{X: float64(n), Y: p50})
		b.r.add(Figure{Scenario: "recall", Name: fmt.Sprintf("recall p50 at %d items", n), Value: p50, Unit: "ms", Limit: LimitBudget, LimitValue: 10})
		b.r.add(Figure{Scenario: "recall", Name: fmt.Sprintf("recall p99 at %d items", n), Value: quantile(lat, 0.99), Unit: "ms"})
	}
	b.r.Series = append(b.r.Series, rs)
	return nil
}

func (b *runner) sandbox(ctx context.Context) error {
	ci := b.cfg.Getenv("CI") != ""
	unavailable := func(err error) error {
		if ci {
			return fmt.Errorf("docker is required in CI: %w", err)
		}
		return fmt.Errorf("%w: Docker is not available (%w)", errSkip, err)
	}
	if _, err := exec.LookPath("docker"); err != nil {
		return unavailable(err)
	}
	be, err := docker.New(docker.Config{})
	if err != nil {
		return unavailable(err)
	}
	defer func() { _ = be.Close() }()
	if err := be.Ping(ctx); err != nil {
		return unavailable(err)
	}
	dir, err := os.MkdirTemp(b.cfg.Dir, "sandbox-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	b.p.set("starting a sandbox")
	sb, err := be.Open(ctx, session.Spec{}, dir)
	if err != nil {
		return unavailable(err)
	}
	defer func() { _ = sb.Close(context.WithoutCancel(ctx)) }()
	call := sandbox.ExecRequest{Argv: []string{"echo", "hi"}}
	if _, err := sb.Exec(ctx, call); err != nil { // warm: the container starts on first use
		return fmt.Errorf("warm sandbox: %w", err)
	}
	ds, ok := sb.(*docker.Sandbox)
	if !ok {
		return fmt.Errorf("docker backend opened a %T", sb)
	}
	id := ds.ContainerID()
	var tRath, tCLI []time.Duration
	_, _, err = drive(ctx, 1, b.cfg.Duration, b.p, "sandbox exec vs docker exec", func(ctx context.Context) (time.Duration, error) {
		t0 := time.Now()
		res, err := sb.Exec(ctx, call)
		if err != nil {
			return 0, fmt.Errorf("sandbox exec: %w", err)
		}
		if string(res.Stdout) != "hi\n" {
			return 0, fmt.Errorf("sandbox exec: stdout %q, want \"hi\\n\"", res.Stdout)
		}
		t1 := time.Now()
		out, err := exec.CommandContext(ctx, "docker", "exec", id, "echo", "hi").Output()
		if err != nil {
			return 0, fmt.Errorf("docker exec: %w", err)
		}
		if string(out) != "hi\n" {
			return 0, fmt.Errorf("docker exec: stdout %q, want \"hi\\n\"", out)
		}
		tRath, tCLI = append(tRath, t1.Sub(t0)), append(tCLI, time.Since(t1))
		return time.Since(t0), nil
	})
	if err != nil {
		return err
	}
	bare := quantile(tCLI, 0.5)
	b.r.Limits = append(b.r.Limits, Limit{Name: LimitDockerCLI, Value: bare, Unit: "ms (p50)", How: "`docker exec <container> echo hi` on the sandbox's warm container, interleaved with the sandbox calls"})
	b.r.add(Figure{Scenario: "sandbox", Name: "tool call (`echo hi`) in a warm sandbox, p50", Value: quantile(tRath, 0.5), Unit: "ms", Limit: LimitDockerCLI})
	return nil
}

func (b *runner) fanout(ctx context.Context) error {
	c, err := newCommitter(b.t)
	if err != nil {
		return err
	}
	defer c.close()
	base, err := b.newSession(ctx, 1) // ends with the user's turn: the script's first reply answers it
	if err != nil {
		return err
	}
	n := b.cfg.Fanout
	rounds, el, err := drive(ctx, 1, b.cfg.Duration, b.p, fmt.Sprintf("fan-out of %d", n), func(ctx context.Context) (time.Duration, error) {
		t0 := time.Now()
		outs := make([]string, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				id, _, err := b.post(ctx, "/v1/sessions/"+base+"/fork", nil)
				if err != nil {
					errs[i] = err
					return
				}
				outs[i], _, errs[i] = b.submit(ctx, c, id)
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return 0, err
			}
		}
		head := outs[0]
		for _, o := range outs[1:] {
			if head, _, err = b.post(ctx, "/v1/sessions/"+head+"/merge", map[string]any{"other": o}); err != nil {
				return 0, err
			}
		}
		return time.Since(t0), nil
	})
	if err != nil {
		return err
	}
	b.r.add(Figure{Scenario: "fanout", Name: fmt.Sprintf("round: fork %d, run each, merge, p50", n), Value: quantile(rounds, 0.5), Unit: "ms"})
	// Each branch commits a fork and a step, and each merge one version.
	commits := float64(len(rounds)*(3*n-1)) / el.Seconds()
	b.r.add(Figure{Scenario: "fanout", Name: "versions committed/s (forks, steps, merges)", Value: commits, Unit: "commits/s", Limit: LimitCommit, HigherIsBetter: true})
	return nil
}
