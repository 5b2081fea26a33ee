package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/cpustat"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/pgstore"
	"github.com/rath-run/rath/pkg/store/storetest"
)

// TestGroupCommit: many commits at once, grouped, among them replays of
// committed keys, commits whose own statement fails, and concurrent
// extensions of one base (lane races): each ends exactly as it would
// alone — committed with its statement, answered with the stored version,
// or refused with nothing written — whatever group it shared.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t, pgstore.Options{GroupCommit: 1})
	if _, err := st.Pool().Exec(ctx, `CREATE TABLE probe (version uuid PRIMARY KEY REFERENCES versions (id))`); err != nil {
		t.Fatal(err)
	}
	root, err := session.FromUserMessage(ctx, st, "hi")
	if err != nil {
		t.Fatal(err)
	}
	first := storetest.Prepare(t, root, "replayed", session.Assistant("ok"))
	if _, err := st.Put(ctx, first); err != nil {
		t.Fatal(err)
	}

	const n = 60
	type result struct {
		v   *session.Version
		got *session.Version
		ran bool
		err error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var v *session.Version
			stmt := pgstore.Stmt{SQL: `INSERT INTO probe (version) VALUES ($1)`}
			switch i % 3 {
			case 0: // plain, extending the same base as every other
				v = storetest.Prepare(t, root, fmt.Sprintf("k%d", i), session.Assistant("ok"))
			case 1: // a replay of a committed key
				v = storetest.Prepare(t, root, "replayed", session.Assistant("ok"))
			case 2: // its own statement fails
				v = storetest.Prepare(t, root, fmt.Sprintf("k%d", i), session.Assistant("ok"))
				stmt.SQL = `INSERT INTO probe (version) VALUES ($1::text::int::uuid)`
			}
			stmt.Args = []any{v.ID}
			got, ran, err := st.PutWith(ctx, v, stmt)
			results[i] = result{v: v, got: got, ran: ran, err: err}
		})
	}
	wg.Wait()

	probes := 0
	for i, r := range results {
		switch i % 3 {
		case 0:
			if r.err != nil || !r.ran || r.got.ID != r.v.ID {
				t.Errorf("commit %d = %v, ran %v, %v; want it committed with its statement", i, r.got, r.ran, r.err)
			}
			probes++
		case 1:
			if r.err != nil || r.ran || r.got.ID != first.ID {
				t.Errorf("replay %d = %v, ran %v, %v; want the first version, not ran", i, r.got, r.ran, r.err)
			}
		case 2:
			if r.err == nil {
				t.Errorf("commit %d with a failing statement: no error", i)
			}
			if _, err := st.GetUncached(ctx, r.v.ID); !errors.Is(err, session.ErrNotFound) {
				t.Errorf("version of failed commit %d: %v, want ErrNotFound", i, err)
			}
		}
	}
	var got int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM probe`).Scan(&got); err != nil || got != probes {
		t.Fatalf("probe rows = %d, %v; want %d", got, err, probes)
	}
	if _, err := st.Verify(ctx); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkParallelAppend: appends to separate sessions from many
// goroutines, with and without group commit.
func BenchmarkParallelAppend(b *testing.B) {
	for _, gc := range []int{-1, 1, 2, 4} {
		b.Run(fmt.Sprintf("group=%d", gc), func(b *testing.B) {
			ctx := context.Background()
			st := openStore(b, pgstore.Options{GroupCommit: gc, MaxConns: 16})
			b.SetParallelism(8) // 16 goroutines on 2 CPUs
			cpu := startCPU(b, st)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				s, err := session.FromUserMessage(ctx, st, "hi")
				if err != nil {
					b.Error(err)
					return
				}
				for pb.Next() {
					if s, err = s.Append(ctx, session.Assistant("ok")); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			cpu.report(b)
		})
	}
}

// cpuMeter measures the CPU time of this process and of the Postgres
// backends serving st, reported per op: on a shared machine CPU per op
// is steadier than time per op.
type cpuMeter struct {
	st           *pgstore.Store
	self, db     time.Duration
	selfOK, dbOK bool
}

func startCPU(b *testing.B, st *pgstore.Store) *cpuMeter {
	m := &cpuMeter{st: st}
	m.self, m.selfOK = cpustat.Self()
	m.db, m.dbOK = cpustat.Backends(context.Background(), st.Pool())
	return m
}

func (m *cpuMeter) report(b *testing.B) {
	if self, ok := cpustat.Self(); ok && m.selfOK {
		b.ReportMetric(float64(self-m.self)/float64(b.N)/1e3, "µs-cpu/op")
	}
	if db, ok := cpustat.Backends(context.Background(), m.st.Pool()); ok && m.dbOK {
		b.ReportMetric(float64(db-m.db)/float64(b.N)/1e3, "µs-dbcpu/op")
	}
}

// TestGroupCommitGivesUpWithItsCaller: a commit whose connection goes
// silent (a partition: packets dropped, nothing closed) returns when its
// caller's context ends, as an ungrouped commit does, rather than keeping
// the caller until the group's own timeout — a worker being shut down or
// fenced must not hang on it.
func TestGroupCommitGivesUpWithItsCaller(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := newDB(t, true)
	host := strings.SplitN(strings.TrimPrefix(dbURL, "postgres://"), "/", 2)[0]
	host = host[strings.Index(host, "@")+1:]
	hole := startBlackhole(t, host)
	st, err := pgstore.Open(ctx, strings.Replace(dbURL, host, hole.addr, 1), pgstore.Options{GroupCommit: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err := session.FromUserMessage(ctx, st, "before the partition")
	if err != nil {
		t.Fatal(err)
	}
	hole.drop.Store(true)
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	start := time.Now()
	_, err = s.Append(cctx, session.Assistant("during the partition"))
	if err == nil {
		t.Fatal("append through a silent connection succeeded")
	}
	took := time.Since(start)
	t.Logf("append through a silent connection gave up after %s: %v", took, err)
	if took > 15*time.Second {
		t.Fatalf("append gave up after %s, want about the caller's 1s", took)
	}
}

// blackhole forwards TCP to target until drop is set; then it reads and
// discards in both directions, closing nothing, like a partitioned network.
type blackhole struct {
	addr string
	drop atomic.Bool
}

func startBlackhole(t *testing.T, target string) *blackhole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &blackhole{addr: ln.Addr().String()}
	var conns sync.Map
	t.Cleanup(func() {
		ln.Close()
		conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
	})
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if err != nil {
				dst.Close()
				return
			}
			if h.drop.Load() {
				continue
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				src.Close()
				return
			}
		}
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			conns.Store(c, true)
			conns.Store(u, true)
			go pipe(u, c)
			go pipe(c, u)
		}
	}()
	return h
}
