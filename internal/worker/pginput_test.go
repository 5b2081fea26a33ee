package worker_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/bus/bustest"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/internal/worker"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/pgstore"
)

// sqlLog records the text of every statement its connections run, alone
// or in a batch.
type sqlLog struct {
	mu   sync.Mutex
	stmt []string
}

func (l *sqlLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.mu.Lock()
	l.stmt = append(l.stmt, d.SQL)
	l.mu.Unlock()
	return ctx
}

func (l *sqlLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// The statements of a batch (pgx.BatchTracer).
func (l *sqlLog) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (l *sqlLog) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	l.mu.Lock()
	l.stmt = append(l.stmt, d.SQL)
	l.mu.Unlock()
}

func (l *sqlLog) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (l *sqlLog) count(sub string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(slices.DeleteFunc(slices.Clone(l.stmt), func(s string) bool { return !strings.Contains(s, sub) }))
}

// On Postgres, a worker whose cache lacks its step's input (a separate
// process from the coordinator that wrote it: every worker of a cluster)
// reads the input with the step's start, in the start's statement, and
// runs the step on it: no statement of its own reads the input's version
// or chunks. Before, each such step read them in a round trip of their own
// after the start.
func TestWorkerReadsItsInputWithTheStart(t *testing.T) {
	ctx := context.Background()
	url := testdb.Postgres(t)
	coord, coordRuns := openStoresAt(ctx, t, url)
	b, _, nc := bustest.NewWith(t, bustest.Options{Config: bus.Config{AckWait: ackWait}})
	r := &rig{bus: b, nc: nc, graph: coord, runs: coordRuns}

	// The worker's stores, on connections whose statements are logged.
	log := &sqlLog{}
	graph, steps := openStoresAt(pgstore.WithQueryTracer(ctx, log), t, url)
	r.startWorkerOn(t, graph, steps, b, worker.Config{Name: "reader", Slots: 2})

	echo := agent.Spec{Name: "echo", Model: "scripted", Script: []llm.ScriptReply{{Content: "read"}}}
	for range 3 {
		run, in := r.submitAgent(t, echo, 1)
		got := r.waitRun(t, run.ID)
		if got.Status != runs.RunSucceeded {
			t.Fatalf("run %s: %s (%s)", run.ID, got.Status, got.Error)
		}
		out, err := session.Open(ctx, coord, *got.Output)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := out.Chunks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := in.Chunks(ctx)
		if len(tr) != len(want)+1 || string(tr[0].Payload()) != string(want[0].Payload()) {
			t.Fatalf("the step's output %v does not extend its input %v", tr, want)
		}
	}
	if n := log.count(pgstore.StepInputJoin); n < 3 {
		t.Errorf("starts that read their input: %d, want one a step (3)", n)
	}
	if n := log.count("JOIN chunks c ON c.version_id = v.id"); n != 0 {
		t.Errorf("the worker read an input's chunks with %d statements of their own, want none", n)
	}
}
