package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testdb"
)

// The tracing e2e: a real Jaeger v2 (built from the Go module proxy and
// cached by scripts/jaeger.sh), the coordinator and a worker as processes
// exporting to it, rathctl as a process; each run must be exactly one trace
// whose span tree is rathctl → API → run → steps → model and tool calls,
// read back through Jaeger's query API. Once over OTLP/HTTP, once over
// OTLP/gRPC.

var (
	jaegerOnce sync.Once
	jaegerBin  string
	jaegerErr  error
)

// jaegerBinary returns the Jaeger binary: RATH_TEST_JAEGER_BIN, or the one
// scripts/jaeger.sh builds into its cache (the first time takes minutes).
// A Jaeger that cannot be had fails the test: it is a required component.
func jaegerBinary(t *testing.T) string {
	t.Helper()
	jaegerOnce.Do(func() {
		if b := os.Getenv("RATH_TEST_JAEGER_BIN"); b != "" {
			jaegerBin = b
			return
		}
		cmd := exec.Command("scripts/jaeger.sh")
		cmd.Dir = ".."
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			jaegerErr = fmt.Errorf("scripts/jaeger.sh: %w\n%s", err, errOut.String())
			return
		}
		line := strings.TrimSpace(out.String())
		jaegerBin = strings.Trim(strings.TrimPrefix(line, "export RATH_TEST_JAEGER_BIN="), "'")
	})
	if jaegerErr != nil {
		t.Fatal(jaegerErr)
	}
	if _, err := os.Stat(jaegerBin); err != nil {
		t.Fatalf("Jaeger binary (RATH_TEST_JAEGER_BIN or scripts/jaeger.sh): %v", err)
	}
	return jaegerBin
}

// jaeger is one running Jaeger v2 with in-memory storage on free ports.
type jaeger struct {
	proc           *proc
	otlpHTTP, otlp string // host:port of the OTLP/HTTP and OTLP/gRPC receivers
	query          string // base URL of the query API
}

func startJaeger(t *testing.T, dir string) *jaeger {
	t.Helper()
	bin := jaegerBinary(t)
	httpPort, grpcPort, queryPort, queryGRPC := freePort(t), freePort(t), freePort(t), freePort(t)
	cfg := fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    traces:
      level: none
    logs:
      level: info
extensions:
  jaeger_query:
    storage:
      traces: mem
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 100000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:%d
      http:
        endpoint: 127.0.0.1:%d
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`, queryPort, queryGRPC, grpcPort, httpPort)
	path := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	j := &jaeger{
		proc:     &proc{name: "jaeger", args: []string{"--config", path}, log: filepath.Join(dir, "jaeger.log")},
		otlpHTTP: fmt.Sprintf("127.0.0.1:%d", httpPort), otlp: fmt.Sprintf("127.0.0.1:%d", grpcPort),
		query: fmt.Sprintf("http://127.0.0.1:%d", queryPort),
	}
	f, err := os.OpenFile(j.proc.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	j.proc.cmd = exec.Command(bin, j.proc.args...)
	// Jaeger's own traces stay home.
	j.proc.cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=none", "OTEL_SDK_DISABLED=true")
	j.proc.cmd.Stdout, j.proc.cmd.Stderr = f, f
	if err := j.proc.cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start jaeger: %v", err)
	}
	j.proc.done = make(chan struct{})
	go func() {
		j.proc.err = j.proc.cmd.Wait()
		f.Close()
		close(j.proc.done)
	}()
	t.Cleanup(func() {
		j.proc.kill(t)
		if t.Failed() {
			t.Logf("--- jaeger output:\n%s", tail(j.proc.output(), 4000))
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := j.services(); err == nil {
			return j
		}
		if !j.proc.running() || time.Now().After(deadline) {
			t.Fatalf("jaeger not serving its query API within 60s:\n%s", tail(j.proc.output(), 4000))
		}
		<-time.After(100 * time.Millisecond)
	}
}

func (j *jaeger) get(path string, q url.Values, out any) error {
	u := j.query + path
	if q != nil {
		u += "?" + q.Encode()
	}
	resp, err := http.Get(u) //nolint:noctx // a test's poll
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", u, resp.Status, b)
	}
	return json.Unmarshal(b, out)
}

func (j *jaeger) services() ([]string, error) {
	var out struct {
		Data []string `json:"data"`
	}
	err := j.get("/api/services", nil, &out)
	return out.Data, err
}

// jTrace is a trace as Jaeger's query API returns it.
type jTrace struct {
	TraceID   string  `json:"traceID"`
	Spans     []jSpan `json:"spans"`
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
	} `json:"processes"`
}

type jSpan struct {
	TraceID    string `json:"traceID"`
	SpanID     string `json:"spanID"`
	Operation  string `json:"operationName"`
	ProcessID  string `json:"processID"`
	References []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
}

func (s jSpan) tag(key string) string {
	for _, t := range s.Tags {
		if t.Key == key {
			return fmt.Sprint(t.Value)
		}
	}
	return ""
}

func (s jSpan) parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" && r.TraceID == s.TraceID {
			return r.SpanID
		}
	}
	return ""
}

// runTraces returns the traces holding a span tagged with run id, from
// every service.
func (j *jaeger) runTraces(runID string) (map[string]jTrace, error) {
	tags, _ := json.Marshal(map[string]string{"rath.run.id": runID})
	out := map[string]jTrace{}
	for _, svc := range []string{"rath-coordinator", "rath-worker"} {
		var res struct {
			Data []jTrace `json:"data"`
		}
		q := url.Values{"service": {svc}, "tags": {string(tags)}, "limit": {"100"}, "lookback": {"1h"}}
		if err := j.get("/api/traces", q, &res); err != nil {
			return nil, err
		}
		for _, tr := range res.Data {
			out[tr.TraceID] = tr
		}
	}
	return out, nil
}

// spanTree is one trace's spans by id, with their services.
type spanTree struct {
	tr    jTrace
	byID  map[string]jSpan
	kids  map[string][]jSpan
	roots []jSpan
}

func newSpanTree(tr jTrace) *spanTree {
	st := &spanTree{tr: tr, byID: map[string]jSpan{}, kids: map[string][]jSpan{}}
	for _, s := range tr.Spans {
		st.byID[s.SpanID] = s
	}
	for _, s := range tr.Spans {
		p := s.parent()
		if _, ok := st.byID[p]; p == "" || !ok {
			st.roots = append(st.roots, s)
			continue
		}
		st.kids[p] = append(st.kids[p], s)
	}
	return st
}

func (st *spanTree) service(s jSpan) string { return st.tr.Processes[s.ProcessID].ServiceName }

// path returns the chain of "service: operation" from the root to s.
func (st *spanTree) path(s jSpan) []string {
	var out []string
	for {
		out = append(out, st.service(s)+": "+s.Operation)
		p, ok := st.byID[s.parent()]
		if !ok {
			break
		}
		s = p
	}
	slices.Reverse(out)
	return out
}

func (st *spanTree) find(pred func(jSpan) bool) []jSpan {
	var out []jSpan
	for _, s := range st.tr.Spans {
		if pred(s) {
			out = append(out, s)
		}
	}
	return out
}

// ancestorOp reports whether one of s's ancestors is op in service svc.
func (st *spanTree) under(s jSpan, svc, op string) bool {
	for {
		p, ok := st.byID[s.parent()]
		if !ok {
			return false
		}
		if st.service(p) == svc && strings.HasPrefix(p.Operation, op) {
			return true
		}
		s = p
	}
}

// checkRunTrace waits until Jaeger holds the run's spans (want names the
// operations that must be there), then asserts that the run is one trace
// rooted at rathctl's command span: rathctl → HTTP client span → the
// coordinator's POST /v1/runs → run → every step's publish → the worker's
// process → invoke_agent → chat and execute_tool.
func checkRunTrace(t *testing.T, j *jaeger, runID, kind string, want map[string]int) *spanTree {
	t.Helper()
	var st *spanTree
	var last string
	deadline := time.Now().Add(60 * time.Second)
	for {
		traces, err := j.runTraces(runID)
		switch {
		case err != nil:
			last = err.Error()
		case len(traces) > 1:
			ids := make([]string, 0, len(traces))
			for id, tr := range traces {
				st := newSpanTree(tr)
				var ops []string
				for _, r := range st.roots {
					ops = append(ops, st.service(r)+": "+r.Operation)
				}
				ids = append(ids, fmt.Sprintf("%s (roots %v)", id, ops))
			}
			t.Fatalf("run %s is %d traces, want 1: %v", runID, len(traces), ids)
		case len(traces) == 1:
			for _, tr := range traces {
				st = newSpanTree(tr)
			}
			// Spans arrive in batches: wait for the whole tree (one root)
			// and every span the run must have.
			last = ""
			for op, n := range want {
				if got := len(st.find(func(s jSpan) bool { return strings.HasPrefix(s.Operation, op) })); got < n {
					last += fmt.Sprintf("%d spans %q (want %d); ", got, op, n)
				}
			}
			if len(st.roots) != 1 {
				var ops []string
				for _, r := range st.roots {
					ops = append(ops, st.service(r)+": "+r.Operation)
				}
				last += fmt.Sprintf("trace %s has %d roots, want 1 (rathctl's): %v", st.tr.TraceID, len(st.roots), ops)
			}
			if last == "" {
				goto check
			}
		default:
			last = "no trace yet"
		}
		if time.Now().After(deadline) {
			var all []string
			if st != nil {
				for _, s := range st.tr.Spans {
					all = append(all, fmt.Sprintf("%s: %s (%s ← %s)", st.service(s), s.Operation, s.SpanID, s.parent()))
				}
			}
			t.Fatalf("run %s: Jaeger did not get the run's spans within 60s: %s\nspans: %s", runID, last, strings.Join(all, "\n  "))
		}
		<-time.After(200 * time.Millisecond)
	}
check:
	root := st.roots[0]
	if st.service(root) != "rathctl" || root.Operation != "rathctl run" {
		t.Errorf("run %s: trace root is %s: %s, want rathctl: rathctl run", runID, st.service(root), root.Operation)
	}
	runSpans := st.find(func(s jSpan) bool { return s.Operation == "run "+kind })
	if len(runSpans) != 1 {
		t.Fatalf("run %s: %d %q spans, want 1", runID, len(runSpans), "run "+kind)
	}
	if got := st.path(runSpans[0]); len(got) < 4 || got[len(got)-2] != "rath-coordinator: POST /v1/runs" ||
		!slices.ContainsFunc(got[:len(got)-2], func(s string) bool { return strings.HasPrefix(s, "rathctl: HTTP") }) {
		t.Errorf("run %s: the run span's path is %v, want rathctl: rathctl run → rathctl: HTTP POST → rath-coordinator: POST /v1/runs → run", runID, got)
	}
	if conv := runSpans[0].tag("gen_ai.conversation.id"); conv == "" {
		t.Errorf("run %s: the run span has no gen_ai.conversation.id", runID)
	}
	// Every worker span hangs below the run span, through a publish.
	for _, s := range st.find(func(s jSpan) bool { return st.service(s) == "rath-worker" }) {
		if !st.under(s, "rath-coordinator", "run "+kind) || !st.under(s, "rath-coordinator", "publish ") {
			t.Errorf("run %s: worker span %v is not below the run span and a publish", runID, st.path(s))
		}
	}
	for _, s := range st.find(func(s jSpan) bool {
		return strings.HasPrefix(s.Operation, "chat ") || strings.HasPrefix(s.Operation, "execute_tool ")
	}) {
		if !st.under(s, "rath-worker", "invoke_agent ") || !st.under(s, "rath-worker", "process ") {
			t.Errorf("run %s: %v is not below a step's process and invoke_agent", runID, st.path(s))
		}
	}
	for _, s := range st.find(func(s jSpan) bool { return strings.HasPrefix(s.Operation, "invoke_agent ") }) {
		if s.tag("gen_ai.conversation.id") != runSpans[0].tag("gen_ai.conversation.id") {
			t.Errorf("run %s: %s has gen_ai.conversation.id %q, want the run's %q", runID, s.Operation,
				s.tag("gen_ai.conversation.id"), runSpans[0].tag("gen_ai.conversation.id"))
		}
	}
	return st
}

func TestJaegerOneTracePerRun(t *testing.T) {
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		t.Run(strings.ReplaceAll(protocol, "/", "-"), func(t *testing.T) {
			// The database first: like every e2e test, this one needs
			// Postgres (skipped without one, failed under
			// RATH_REQUIRE_POSTGRES=1), then Jaeger (never skipped).
			storeURL := testdb.Postgres(t)
			dir := t.TempDir()
			j := startJaeger(t, dir)
			endpoint := "http://" + j.otlpHTTP
			if protocol == "grpc" {
				endpoint = "http://" + j.otlp
			}
			env := []string{
				"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL=" + protocol,
				"OTEL_EXPORTER_OTLP_INSECURE=true", "OTEL_BSP_SCHEDULE_DELAY=100",
			}
			c := newCluster(t, clusterConfig{workers: 1, env: env, ctlEnv: env, storeURL: storeURL})
			testAgentRunTrace(t, c, j)
			testWorkflowRunTrace(t, c, j)
		})
	}
}

// testAgentRunTrace: an agent with a tool is one trace.
func testAgentRunTrace(t *testing.T, c *cluster, j *jaeger) {
	t.Helper()
	agent := filepath.Join(c.dir, "scribe.yaml")
	spec := `name: scribe
model: scripted
tools: [builtin]
script:
  - tool_calls: [{id: w1, function: {name: write_workspace_file, arguments: {path: notes.txt, content: "traced"}}}]
  - content: saved the notes
`
	if err := os.WriteFile(agent, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	r := c.submitJSON("run", "--agent", agent, "--message", "write it down", "-o", "json")
	c.waitSucceeded(r.ID)
	checkRunTrace(t, j, r.ID, "agent", map[string]int{
		"invoke_agent scribe": 1, "chat ": 2, "execute_tool write_workspace_file": 1, "store commit": 1,
	})
}

// testWorkflowRunTrace: a workflow with a fan-out, a selector and a step
// that waits for an approval (decided by `rathctl approve`, a trace of
// its own) is one trace; the continuation after the approval and the
// driver's steps are children of the run span.
func testWorkflowRunTrace(t *testing.T, c *cluster, j *jaeger) {
	t.Helper()
	wf := filepath.Join(c.dir, "traced.yaml")
	// A scripted model answers with script[n], n being the number of
	// assistant messages in its request: after the fan-out's merge the
	// conversation holds two (left, right), after the writer three.
	spec := `version: 1
name: traced
agents:
  left:
    model: scripted
    script: [left branch]
  right:
    model: scripted
    script: [right branch]
  router:
    model: scripted
    script: ["-1", "-1", "0", "-1"]
  writer:
    description: writes the answer
    model: scripted
    script: [unused, unused, the answer]
  scribe:
    model: scripted
    tools: [builtin]
    approve: [write_workspace_file]
    script:
      - unused
      - unused
      - unused
      - tool_calls: [{id: w1, function: {name: write_workspace_file, arguments: {path: notes.txt, content: "approved"}}}]
      - content: saved
steps:
  - fork: {branches: [left, right]}
  - select: {selector: router, candidates: [writer], max_rounds: 3}
  - agent: scribe
`
	if err := os.WriteFile(wf, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	r := c.submitJSON("run", wf, "--message", "trace this workflow", "-o", "json")
	c.waitRun(r.ID, 90*time.Second, "waiting for approval", func(r runs.Run) bool {
		return r.Status == runs.RunWaiting || r.Status.Terminal()
	})
	if _, err := c.rathctl("approve", r.ID); err != nil {
		t.Fatal(err)
	}
	c.waitSucceeded(r.ID)
	st := checkRunTrace(t, j, r.ID, "workflow", map[string]int{
		"drive workflow": 1, "invoke_agent left": 1, "invoke_agent right": 1, "invoke_agent router": 2,
		"invoke_agent writer": 1, "invoke_agent scribe": 2, "execute_tool write_workspace_file": 1,
		"store commit fork": 2, "store commit merge": 1,
	})
	// The driver's forks and merges hang below its drive, in the run.
	for _, s := range st.find(func(s jSpan) bool {
		return strings.HasPrefix(s.Operation, "store commit f") || strings.HasPrefix(s.Operation, "store commit m")
	}) {
		if !st.under(s, "rath-coordinator", "drive workflow") || !st.under(s, "rath-coordinator", "run workflow") {
			t.Errorf("run %s: %v is not below the drive and the run span", r.ID, st.path(s))
		}
	}
}

// submitJSON runs rathctl with args (which print a run as JSON) and
// returns the run.
func (c *cluster) submitJSON(args ...string) runs.Run {
	c.t.Helper()
	out, err := c.rathctl(args...)
	if err != nil {
		c.t.Fatal(err)
	}
	var r runs.Run
	if err := json.Unmarshal(out, &r); err != nil {
		c.t.Fatalf("rathctl %v output %q: %v", args, out, err)
	}
	return r
}
