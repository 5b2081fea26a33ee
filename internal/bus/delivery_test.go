package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/bus/bustest"
	"github.com/rath-run/rath/internal/testenv"
)

const testAckWait = 300 * time.Millisecond

func shortAckBus(t *testing.T, maxDeliver int) *bus.Bus {
	t.Helper()
	b, _, _ := bustest.NewWith(t, bustest.Options{Config: bus.Config{AckWait: testAckWait, MaxDeliver: maxDeliver}})
	return b
}

// A job not acked within AckWait is redelivered with NumDelivered = 2.
// (This is also the negative control of TestKeepAlivePreventsRedelivery.)
func TestAckWaitRedelivery(t *testing.T) {
	t.Parallel()
	b := shortAckBus(t, 5)
	ctx := testCtx(t)
	c, err := b.Consumer(ctx, "redeliver")
	if err != nil {
		t.Fatal(err)
	}
	mustPublish(ctx, t, b, testJob("redeliver", "slow-1"))
	// Measured from before the fetch: the server starts the ack timer when
	// it sends the job, which is no later than this.
	fetched := time.Now()
	d1 := fetchOne(ctx, t, c, 5*time.Second)
	if d1.NumDelivered() != 1 {
		t.Fatalf("first NumDelivered = %d", d1.NumDelivered())
	}
	// Hold it without keepalive for > 3× AckWait: it must come back.
	d2 := fetchOne(ctx, t, c, 4*testAckWait)
	if el := time.Since(fetched); el < testAckWait {
		t.Fatalf("redelivered after %s, before AckWait %s", el, testAckWait)
	}
	if d2.Job.StepID != "slow-1" || d2.NumDelivered() != 2 || d2.StreamSeq() != d1.StreamSeq() {
		t.Fatalf("redelivery: step %s NumDelivered %d seq %d/%d", d2.Job.StepID, d2.NumDelivered(), d2.StreamSeq(), d1.StreamSeq())
	}
	if err := d2.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	fetchNone(ctx, t, c, 2*testAckWait)
}

// KeepAlive prevents redelivery for well over 3× AckWait.
func TestKeepAlivePreventsRedelivery(t *testing.T) {
	t.Parallel()
	b := shortAckBus(t, 5)
	ctx := testCtx(t)
	c, err := b.Consumer(ctx, "keepalive")
	if err != nil {
		t.Fatal(err)
	}
	mustPublish(ctx, t, b, testJob("keepalive", "long-1"))
	d := fetchOne(ctx, t, c, 5*time.Second)
	// AckWait/6 rather than the default AckWait/3: more margin for a loaded
	// test machine (the default interval is exercised by the example).
	stop := d.KeepAlive(ctx, testAckWait/6)
	// While the step "runs", nothing is redelivered for 4× AckWait.
	fetchNone(ctx, t, c, 4*testAckWait)
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	stop()
	stop() // idempotent
	fetchNone(ctx, t, c, 2*testAckWait)
	if info := consumerInfo(ctx, t, b, "keepalive"); info.NumRedelivered != 0 || info.NumAckPending != 0 {
		t.Fatalf("consumer: redelivered %d, ack pending %d", info.NumRedelivered, info.NumAckPending)
	}
}

// KeepAlive ends when its context ends, and stop still returns.
func TestKeepAliveStopsWithContext(t *testing.T) {
	t.Parallel()
	b := shortAckBus(t, 5)
	ctx := testCtx(t)
	c, err := b.Consumer(ctx, "kactx")
	if err != nil {
		t.Fatal(err)
	}
	mustPublish(ctx, t, b, testJob("kactx", "ka-ctx"))
	d := fetchOne(ctx, t, c, 5*time.Second)
	kctx, cancel := context.WithCancel(ctx)
	stop := d.KeepAlive(kctx, 50*time.Millisecond)
	cancel()
	stop()
	// With keepalive gone, the job is redelivered.
	d2 := fetchOne(ctx, t, c, 4*testAckWait)
	if d2.NumDelivered() != 2 {
		t.Fatalf("NumDelivered = %d", d2.NumDelivered())
	}
	if err := d2.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// Nak(delay) redelivers after the delay, not before; Nak(0) at once.
func TestNak(t *testing.T) {
	t.Parallel()
	b, _, _ := bustest.New(t) // AckWait 30s: any redelivery here is the Nak's
	ctx := testCtx(t)
	c, err := b.Consumer(ctx, "nak")
	if err != nil {
		t.Fatal(err)
	}
	mustPublish(ctx, t, b, testJob("nak", "nak-1"))
	d := fetchOne(ctx, t, c, 5*time.Second)
	const delay = 600 * time.Millisecond
	naked := time.Now()
	if err := d.Nak(delay); err != nil {
		t.Fatal(err)
	}
	fetchNone(ctx, t, c, delay/3)
	d = fetchOne(ctx, t, c, 5*time.Second)
	if el := time.Since(naked); el < delay*9/10 {
		t.Fatalf("redelivered %s after Nak(%s)", el, delay)
	}
	if d.NumDelivered() != 2 {
		t.Fatalf("NumDelivered = %d, want 2", d.NumDelivered())
	}
	naked = time.Now()
	if err := d.Nak(0); err != nil {
		t.Fatal(err)
	}
	d = fetchOne(ctx, t, c, 5*time.Second)
	if d.NumDelivered() != 3 {
		t.Fatalf("NumDelivered = %d, want 3", d.NumDelivered())
	}
	if el := time.Since(naked); el > 5*time.Second {
		t.Fatalf("Nak(0) redelivered after %s", el)
	}
	if err := d.Nak(-time.Second); !errors.Is(err, bus.ErrInvalidConfig) {
		t.Fatalf("Nak(negative): %v", err)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	// Settling twice is reported, not silently accepted.
	if err := d.Ack(ctx); err == nil {
		t.Fatal("second Ack succeeded")
	}
}

// Term stops redelivery and removes the job from the work queue.
func TestTerm(t *testing.T) {
	t.Parallel()
	b := shortAckBus(t, 5)
	ctx := testCtx(t)
	c, err := b.Consumer(ctx, "term")
	if err != nil {
		t.Fatal(err)
	}
	mustPublish(ctx, t, b, testJob("term", "term-1"))
	d := fetchOne(ctx, t, c, 5*time.Second)
	if err := d.Term("permanent: model refused"); err != nil {
		t.Fatal(err)
	}
	fetchNone(ctx, t, c, 4*testAckWait)
	testenv.Eventually(t, 5*time.Second, "terminated job to leave the work queue", func() bool {
		return streamMsgs(ctx, t, b, bus.JobsStream) == 0
	})
}

// After MaxDeliver deliveries a job is not delivered again.
func TestMaxDeliverExhaustion(t *testing.T) {
	t.Parallel()
	b := shortAckBus(t, 3)
	ctx := testCtx(t)
	c, err := b.Consumer(ctx, "maxdel")
	if err != nil {
		t.Fatal(err)
	}
	mustPublish(ctx, t, b, testJob("maxdel", "poison"))
	for want := uint64(1); want <= 3; want++ {
		d := fetchOne(ctx, t, c, 5*time.Second)
		if d.NumDelivered() != want {
			t.Fatalf("delivery %d: NumDelivered = %d", want, d.NumDelivered())
		}
		if want < 3 {
			if err := d.Nak(0); err != nil {
				t.Fatal(err)
			}
		}
		// The last delivery is neither acked nor naked: it times out.
	}
	fetchNone(ctx, t, c, 4*testAckWait)
	// The exhausted job stays in the stream as a dead letter.
	if n := streamMsgs(ctx, t, b, bus.JobsStream); n != 1 {
		t.Fatalf("stream holds %d jobs after exhaustion, want the dead letter", n)
	}
	// A fresh job on the same queue still flows.
	mustPublish(ctx, t, b, testJob("maxdel", "healthy"))
	d := fetchOne(ctx, t, c, 5*time.Second)
	if d.Job.StepID != "healthy" {
		t.Fatalf("got %s after exhaustion, want healthy", d.Job.StepID)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// Undecodable payloads arrive as Delivery.Err, never as a Fetch failure,
// and can be terminated.
func TestMalformedPayload(t *testing.T) {
	t.Parallel()
	b := shortAckBus(t, 5)
	ctx := testCtx(t)
	c, err := b.Consumer(ctx, "garbage")
	if err != nil {
		t.Fatal(err)
	}
	js := b.JetStream()
	subj := bus.JobSubject("garbage")
	raw := func(id string, data string, version string) {
		m := nats.NewMsg(subj)
		m.Data = []byte(data)
		m.Header.Set(nats.MsgIdHdr, id)
		if version != "" {
			m.Header.Set(bus.HeaderJobVersion, version)
		}
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	good := testJob("garbage", "ok")
	raw("g1", "not json at all", "")
	raw("g2", `{"v":2,"step_id":"future","run_id":"r","queue":"garbage","input":"`+good.Input+`","target":{},"created_at":"2030-01-01T00:00:00Z"}`, "")
	raw("g3", `{"v":1,"step_id":"x"}`, "")
	raw("g4", `{}`, "9")
	mustPublish(ctx, t, b, good)

	wantErr := map[string]string{"g1": "decode", "g2": "v = 2", "g3": "run_id", "g4": "Rath-Job-Version"}
	got := 0
	for got < 5 {
		ds, err := c.Fetch(ctx, 5, 5*time.Second)
		if err != nil {
			t.Fatalf("Fetch must not fail on garbage: %v", err)
		}
		if len(ds) == 0 {
			t.Fatalf("only %d of 5 messages delivered", got)
		}
		for _, d := range ds {
			got++
			id := d.Header.Get(nats.MsgIdHdr)
			if id == "ok" {
				if d.Err != nil {
					t.Fatalf("valid job reported %v", d.Err)
				}
				if err := d.Ack(ctx); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if !errors.Is(d.Err, bus.ErrMalformedJob) || !strings.Contains(d.Err.Error(), wantErr[id]) {
				t.Fatalf("%s: Err = %v, want ErrMalformedJob naming %q", id, d.Err, wantErr[id])
			}
			if id == "g2" && d.Job.StepID != "future" {
				t.Fatalf("partially decoded job lost: %+v", d.Job)
			}
			if err := d.Term(d.Err.Error()); err != nil {
				t.Fatal(err)
			}
		}
	}
	fetchNone(ctx, t, c, 4*testAckWait)
}

// Fetch returns a backlog at once, and when it has to wait it returns the
// first job as soon as it arrives instead of holding it to fill the batch
// (a batch waiting longer than AckWait would collect redeliveries of its
// own jobs).
func TestFetchDoesNotHoldBatch(t *testing.T) {
	t.Parallel()
	b := shortAckBus(t, 5)
	ctx := testCtx(t)
	c, err := b.Consumer(ctx, "batch")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range stepIDs("backlog", 5) {
		mustPublish(ctx, t, b, testJob("batch", id))
	}
	ds, err := c.Fetch(ctx, 5, 10*testAckWait)
	if err != nil || len(ds) != 5 {
		t.Fatalf("backlog fetch: %d deliveries, %v; want 5", len(ds), err)
	}
	for _, d := range ds {
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}

	type result struct {
		ds  []*bus.Delivery
		err error
		at  time.Time
	}
	res := make(chan result, 1)
	start := time.Now()
	go func() {
		ds, err := c.Fetch(ctx, 5, 10*testAckWait)
		res <- result{ds, err, time.Now()}
	}()
	mustPublish(ctx, t, b, testJob("batch", "lone"))
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.ds) != 1 || r.ds[0].Job.StepID != "lone" || r.ds[0].NumDelivered() != 1 {
		var got []string
		for _, d := range r.ds {
			got = append(got, fmt.Sprintf("%s#%d", d.Job.StepID, d.NumDelivered()))
		}
		t.Fatalf("waiting fetch returned %v, want [lone#1]", got)
	}
	if el := r.at.Sub(start); el >= 10*testAckWait {
		t.Fatalf("waiting fetch returned after %s: it held the job for the full wait", el)
	}
	if err := r.ds[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// AckNoWait settles a job with one message and asks for no reply (a
// confirmed Ack asks for one: the negative control): the job leaves the
// work queue and is not redelivered.
func TestAckNoWaitSettlesWithoutAReply(t *testing.T) {
	t.Parallel()
	b, _, nc := bustest.NewWith(t, bustest.Options{Config: bus.Config{AckWait: testAckWait, MaxDeliver: 5}})
	ctx := testCtx(t)
	acks, err := nc.SubscribeSync("$JS.ACK.>")
	if err != nil {
		t.Fatal(err)
	}
	c, err := b.Consumer(ctx, "nowait")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		step      string
		settle    func(*bus.Delivery) error
		wantReply bool
	}{
		{"confirmed-1", func(d *bus.Delivery) error { return d.Ack(ctx) }, true},
		{"nowait-1", func(d *bus.Delivery) error { return d.AckNoWait() }, false},
	} {
		mustPublish(ctx, t, b, testJob("nowait", tc.step))
		d := fetchOne(ctx, t, c, 5*time.Second)
		if err := tc.settle(d); err != nil {
			t.Fatalf("%s: %v", tc.step, err)
		}
		m, err := acks.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("%s: the ack was not seen: %v", tc.step, err)
		}
		if got := m.Reply != ""; got != tc.wantReply {
			t.Errorf("%s: the ack asks for a reply: %v, want %v", tc.step, got, tc.wantReply)
		}
	}
	// Neither job comes back, and nothing is left pending.
	fetchNone(ctx, t, c, 3*testAckWait)
	testenv.Eventually(t, 5*time.Second, "no ack pending", func() bool {
		info := consumerInfo(ctx, t, b, "nowait")
		return info.NumAckPending == 0 && info.NumRedelivered == 0
	})
}

// A worker with free slots whose queue keeps up asks the server for each
// job once: its long poll. A fetch tries for a batch without waiting only
// while the last job delivered said more were waiting behind it (before,
// every fetch asked twice: a no-wait batch that the server answered with
// "no messages", then the long poll). A backlog is still taken in batches.
func TestFetchAsksOnceWhenNothingWaits(t *testing.T) {
	t.Parallel()
	b, srv, _ := bustest.NewWith(t, bustest.Options{})
	ctx := testCtx(t)
	c, err := b.Consumer(ctx, "once")
	if err != nil {
		t.Fatal(err)
	}
	mon, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	type pull struct {
		NoWait  bool  `json:"no_wait"`
		Expires int64 `json:"expires"`
	}
	pulls := make(chan pull, 256)
	if _, err := mon.Subscribe("$JS.API.CONSUMER.MSG.NEXT.RATH_JOBS."+bus.ConsumerName("once"), func(m *nats.Msg) {
		var p pull
		if err := json.Unmarshal(m.Data, &p); err != nil {
			t.Errorf("pull request %q: %v", m.Data, err)
		}
		pulls <- p
	}); err != nil {
		t.Fatal(err)
	}
	if err := mon.Flush(); err != nil {
		t.Fatal(err)
	}

	const jobs = 10
	requests := 0
	for i := range jobs {
		res := make(chan []*bus.Delivery, 1)
		go func() {
			ds, err := c.Fetch(ctx, 4, 10*time.Second) // four free slots
			if err != nil {
				t.Errorf("fetch: %v", err)
			}
			res <- ds
		}()
		// Publish once the fetch waits on the server, so that only a long
		// poll can take the job.
		for waiting := false; !waiting; {
			select {
			case p := <-pulls:
				requests++
				waiting = p.Expires > 0 && !p.NoWait
			case <-ctx.Done():
				t.Fatal("no long poll")
			}
		}
		step := fmt.Sprintf("lone-%d", i)
		mustPublish(ctx, t, b, testJob("once", step))
		ds := <-res
		if len(ds) != 1 || ds[0].Job.StepID != step {
			t.Fatalf("fetch %d returned %d deliveries, want %s", i, len(ds), step)
		}
		if err := ds[0].Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The first fetch knows nothing yet and tries for a batch first.
	if requests > jobs+1 {
		t.Fatalf("%d pull requests for %d jobs that each came to a waiting fetch, want at most %d", requests, jobs, jobs+1)
	}

	// A backlog: the long poll's job says more wait behind it, and the next
	// fetch takes a batch at once.
	for _, id := range stepIDs("backlog", 6) {
		mustPublish(ctx, t, b, testJob("once", id))
	}
	var got []*bus.Delivery
	for _, want := range []int{1, 4, 1} {
		ds, err := c.Fetch(ctx, 4, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) != want {
			t.Fatalf("backlog: fetch returned %d jobs after %d, want %d", len(ds), len(got), want)
		}
		got = append(got, ds...)
	}
	for _, d := range got {
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
