package bus_test

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/bus/bustest"
)

// TestFetchKeepsAJobArrivingAsThePollEnds: a job the server sends a
// long poll just before the poll's time is up reaches the caller. With
// MaxDeliver 1 a job received and dropped is never delivered again, so
// each one published must come out of a Fetch. A busy process receives
// it late: here one processor is shared with a goroutine that spins, and
// the jobs are published in the poll's last tenth (seen in CI as a run
// that never ended, TestBadInputCatalogModel).
//
// Not parallel: it sets GOMAXPROCS, and runs before the package's
// parallel tests start.
func TestFetchKeepsAJobArrivingAsThePollEnds(t *testing.T) {
	b, _, _ := bustest.NewWith(t, bustest.Options{Config: bus.Config{AckWait: time.Minute, MaxDeliver: 1}})
	ctx := testCtx(t)
	c, err := b.Consumer(ctx, "late")
	if err != nil {
		t.Fatal(err)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var stop atomic.Bool
	spun := make(chan struct{})
	go func() {
		defer close(spun)
		for !stop.Load() {
		}
	}()
	defer func() { stop.Store(true); <-spun }()

	const polls, maxWait = 30, 40 * time.Millisecond
	got := map[string]int{}
	take := func(ds []*bus.Delivery) {
		for _, d := range ds {
			got[d.Job.StepID]++
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range polls {
		res := make(chan []*bus.Delivery, 1)
		go func() {
			ds, err := c.Fetch(ctx, 1, maxWait)
			if err != nil {
				t.Error(err)
			}
			res <- ds
		}()
		// The poll's last tenth, a little before: where the server still
		// sends it to this poll.
		<-time.After(maxWait * time.Duration(85+i%5) / 100)
		mustPublish(ctx, t, b, testJob("late", fmt.Sprintf("late-%d", i)))
		take(<-res)
	}
	stop.Store(true)
	// Whatever no poll took is still queued.
	for {
		ds, err := c.Fetch(ctx, polls, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			break
		}
		take(ds)
	}
	lost := 0
	for i := range polls {
		if n := got[fmt.Sprintf("late-%d", i)]; n != 1 {
			lost++
			t.Logf("late-%d delivered %d times", i, n)
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d jobs published as a poll ended were not delivered once", lost, polls)
	}
	if info := consumerInfo(ctx, t, b, "late"); info.NumAckPending != 0 {
		t.Errorf("%d jobs delivered and never handed over (ack pending)", info.NumAckPending)
	}
}
