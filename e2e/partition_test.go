package e2e

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/llm/llmtest"
)

// netProxy is a TCP proxy between one worker and a server (NATS or
// Postgres) that the test can partition: while partitioned it forwards no
// byte in either direction and connects nothing new, but keeps every
// connection open, as a cut link does (TCP retransmits until the link
// heals); heal lets the held bytes through.
//
// A proxy in the test process was chosen over network namespaces: it
// needs no root or CAP_NET_ADMIN, runs the same on a laptop and in CI, and
// the partition it makes is exact (one worker, both of its servers).
type netProxy struct {
	t      *testing.T
	ln     net.Listener
	target string
	mu     sync.Mutex
	// flowing is closed while traffic flows; partition swaps in an open one.
	flowing chan struct{}
	conns   []net.Conn
}

func newNetProxy(t *testing.T, target string) *netProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &netProxy{t: t, ln: ln, target: target, flowing: make(chan struct{})}
	close(p.flowing)
	t.Cleanup(p.close)
	go p.accept()
	return p
}

func (p *netProxy) addr() string { return p.ln.Addr().String() }

func (p *netProxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.flowing
}

func (p *netProxy) partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.flowing:
		p.flowing = make(chan struct{})
	default:
	}
}

func (p *netProxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.flowing:
	default:
		close(p.flowing)
	}
}

func (p *netProxy) close() {
	p.heal()
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
}

func (p *netProxy) track(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns = append(p.conns, c)
}

func (p *netProxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.track(in)
		go func() {
			<-p.gate()
			out, err := net.Dial("tcp", p.target)
			if err != nil {
				_ = in.Close()
				return
			}
			p.track(out)
			go p.pipe(out, in)
			go p.pipe(in, out)
		}()
	}
}

// pipe copies src to dst, holding every read and write while partitioned.
func (p *netProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		<-p.gate()
		n, err := src.Read(buf)
		if n > 0 {
			<-p.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			// EOF, a reset or the proxy closing: the copy ends either way
			// (no logging: it may happen after the test has finished).
			return
		}
	}
}

// withHost returns rawURL with its host:port replaced.
func withHost(t *testing.T, rawURL, hostPort string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = hostPort
	return u.String()
}

// TestPartitionedWorkerIsFenced cuts the worker running a step off from
// NATS and Postgres (through proxies the test controls) for longer than the
// ack wait: JetStream redelivers the job to another worker, which commits
// the step. Then the cut-off worker's model call returns and the link
// heals: the stale worker must not fail the step nor commit a second
// version — either its late commit is fenced by the step's unique commit
// key (Put returns the version already committed, recorded as the step's
// commit, a no-op) or it sees the step ended and abandons the work. One
// version, the step committed once, the run succeeded, the checker passes.
func TestPartitionedWorkerIsFenced(t *testing.T) {
	t.Parallel()
	const message = "partition me"
	release := make(chan struct{})
	var releaseOnce sync.Once
	model := llmtest.NewServer(t)
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	var mu sync.Mutex
	calls := 0
	model.Handle(func(llmtest.Request) llmtest.Reply {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 1 {
			// The first execution (on the worker about to be cut off)
			// answers only once the test releases it.
			<-release
			return llmtest.Reply{Content: "the stale worker's answer"}
		}
		return llmtest.Reply{Content: "the live worker's answer"}
	})
	env := []string{"OPENAI_API_KEY=sk-partition-test", "OPENAI_BASE_URL=" + model.URL(), "OPENAI_DEFAULT_MODEL=fake"}
	c := newCluster(t, clusterConfig{workers: 1, env: env})
	live := c.workers[0]

	// The worker to be cut off reaches NATS and Postgres only through
	// proxies.
	natsProxy := newNetProxy(t, strings.TrimPrefix(c.natsURL, "nats://"))
	pgu, err := url.Parse(c.storeURL)
	if err != nil {
		t.Fatal(err)
	}
	pgProxy := newNetProxy(t, pgu.Host)
	stale := c.add("worker", "--store", withHost(t, c.storeURL, pgProxy.addr()), "--nats", "nats://"+natsProxy.addr(),
		"--name", "w2", "--health", "", "--slots", "1", "--ack-wait", "2s", "--heartbeat", "300ms", "--shutdown-timeout", "5s")
	stale.label, stale.env = "w2", env
	c.workers = append(c.workers, stale)

	// Only the proxied worker runs at first, so it takes the step.
	live.stop(t)
	stale.start(t)
	var r runs.Run
	if r, err = submitRun(context.Background(), c.client(), message); err != nil {
		t.Fatal(err)
	}
	if w := c.runningOn(r.ID); w != stale {
		t.Fatalf("step runs on %s, want the proxied w2", w.label)
	}
	testenv.Eventually(t, 30*time.Second, "the stale worker's model call", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return calls == 1
	})

	// Cut it off, bring the other worker back: after the ack wait the job
	// is redelivered to it and committed.
	cut := time.Now()
	natsProxy.partition()
	pgProxy.partition()
	live.start(t)
	r = c.waitSucceeded(r.ID)
	st := r.Steps[0]
	if st.Worker != live.label || st.Attempts < 2 {
		t.Fatalf("step committed by %s after %d attempts, want a redelivery to %s", st.Worker, st.Attempts, live.label)
	}
	redelivered := time.Since(cut)

	// The stale worker's model call returns while it is still cut off: its
	// commit waits on the partition. Then heal.
	releaseOnce.Do(func() { close(release) })
	testenv.Eventually(t, 10*time.Second, "the stale model call answered", func() bool {
		return len(model.Requests()) >= 2
	})
	pgProxy.heal()
	natsProxy.heal()
	healed := time.Now()

	// The stale worker settles the step without failing it, in one of two
	// ways: its commit, keyed by the step id, returns the live worker's
	// version and is recorded as the step's commit (a no-op); or the worker
	// sees first that the step ended elsewhere and abandons the work
	// before its commit lands.
	want := fmt.Sprintf(`"step_id":%q`, st.ID)
	outcome := ""
	testenv.Eventually(t, 60*time.Second, "the stale worker settled the step", func() bool {
		for _, line := range strings.Split(stale.output(), "\n") {
			if !strings.Contains(line, want) {
				continue
			}
			switch {
			case strings.Contains(line, `"msg":"step committed"`):
				if !strings.Contains(line, r.Output.String()) {
					t.Fatalf("stale worker committed another version than the run's %s: %s", r.Output, line)
				}
				outcome = "its late commit returned the committed version " + r.Output.String()
				return true
			case strings.Contains(line, "step ended by its run; aborting"):
				outcome = "it saw the step committed elsewhere and abandoned its commit"
				return true
			}
		}
		return false
	})
	for _, line := range strings.Split(stale.output(), "\n") {
		if strings.Contains(line, want) && (strings.Contains(line, `"msg":"step failed"`) || strings.Contains(line, "will retry")) {
			t.Fatalf("the stale worker treated the fenced step as a failure: %s", line)
		}
	}
	r2, err := c.run(r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Status != runs.RunSucceeded || r2.Steps[0].Status != runs.StepCommitted || *r2.Output != *r.Output {
		t.Fatalf("after the heal the run is %s, step %s, output %v; want succeeded, committed, %s", r2.Status, r2.Steps[0].Status, r2.Output, r.Output)
	}
	c.waitDrained()
	c.checkOneCommit(c.graph(), r)
	c.checkInvariants()
	t.Logf("partition: cut off for %s (ack wait 2s) until the redelivered step committed on %s; after the heal the stale worker settled within %s: %s; model calls for the step: %d; duplicate commits: 0",
		redelivered.Round(time.Millisecond), live.label, time.Since(healed).Round(time.Millisecond), outcome, len(model.Requests()))
}
